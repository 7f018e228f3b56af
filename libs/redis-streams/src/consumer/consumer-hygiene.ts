import type { Logger } from '../ports.js';
import { describeError } from '../describe-error.js';
import type { StreamCommands } from '../redis/stream-commands.js';

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
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** The last failure logged per stream: the same one is logged once, not every interval. */
  private readonly lastFailure = new Map<string, string>();

  constructor(private readonly d: ConsumerHygieneDeps) {}

  start(): void {
    this.tick();
  }

  /** No new run; waits for one in progress (bounded by commandTimeoutMs per command). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private tick(): void {
    if (this.stopped) return;
    this.running = this.runOnce().finally(() => {
      this.running = undefined;
      if (!this.stopped) this.timer = setTimeout(() => this.tick(), this.d.intervalMs);
    });
  }

  private async runOnce(): Promise<void> {
    for (const stream of this.d.streams) {
      if (this.stopped) return;
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
