import { defer, ignoreElements, lastValueFrom, repeat, takeUntil, timer } from 'rxjs';
import type { Logger } from '../../ports.js';
import { StopSignal } from '../stop-signal.js';
import { describeError } from '../../describe-error.js';
import type { StreamCommands } from '../../redis/stream-commands.js';

export interface ConsumerHygieneDeps {
  streams: readonly string[];
  commands: StreamCommands;
  consumer: string;
  idleMs: number;
  intervalMs: number;
  /** The lock key of a stream (in its cluster slot). */
  lockOf: (stream: string) => string;
  onDeleted: (stream: string, consumers: string[]) => void;
  logger: Logger;
}

/**
 * Deletes consumers left behind by restarts under new names (idle past `idleMs`, owning nothing),
 * once right after the start and then every `intervalMs`; workers of one group share the work
 * through a lock key, so each stream is cleaned at most once per interval. Beside the consumer
 * loop, never in it: a slow or failing cleanup delays no entry.
 */
export class ConsumerHygiene {
  /** Its own stop signal: the engine's run stops it with the loops. */
  private readonly stopSignal = new StopSignal();
  /** The runs, once at once and then every intervalMs, until stopped: a run in progress ends first. */
  private readonly done: Promise<void>;
  /** The last failure logged per stream: the same one is logged once, not every interval. */
  private readonly lastFailure = new Map<string, string>();

  constructor(private readonly d: ConsumerHygieneDeps) {
    const stop = this.stopSignal;
    this.done = lastValueFrom(
      // A run that fails outside its per-stream steps is told, and the next one comes all the same.
      defer(() => this.runOnce().catch((err: unknown) => d.logger.warn(`consumer cleanup failed: ${describeError(err)}`))).pipe(
        repeat({ delay: () => timer(d.intervalMs).pipe(takeUntil(stop.stopped$)) }),
        ignoreElements(),
      ),
      { defaultValue: undefined },
    );
  }

  /** No new run; waits for one in progress (bounded by commandTimeoutMs per command). */
  async stop(): Promise<void> {
    this.stopSignal.stop('stopping');
    await this.done;
  }

  private async runOnce(): Promise<void> {
    for (const stream of this.d.streams) {
      if (this.stopSignal.stopped) return;
      try {
        const deleted = await this.d.commands.deleteIdleConsumers(
          stream,
          this.d.lockOf(stream),
          this.d.consumer,
          this.d.idleMs,
          this.d.intervalMs,
        );
        this.lastFailure.delete(stream);
        if (deleted && deleted.length > 0) this.d.onDeleted(stream, deleted);
      } catch (err) {
        const failure = describeError(err);
        if (this.lastFailure.get(stream) === failure) continue;
        this.lastFailure.set(stream, failure);
        // Inside a script a missing ACL right reads "ERR … can't run this command" on Redis 7.0 and
        // "ERR ACL failure in script: … has no permissions to run …" on Valkey 8 (and Redis 7.2+).
        const hint = /NOPERM|no permissions|can't run this command|has no permissions to run/.test(failure)
          ? '; it needs +xinfo|consumers +xgroup|delconsumer +set +pttl +client|list (or consumerCleanup: false)'
          : '';
        this.d.logger.warn(
          `consumer cleanup of "${stream}" failed, tried again every ${this.d.intervalMs} ms (logged again when the error changes): ${failure}${hint}`,
        );
      }
    }
  }
}
