import { defer, ignoreElements, lastValueFrom, repeat, takeUntil, timer } from 'rxjs';
import { describeError } from '../../describe-error.js';
import type { RateLimit } from '../../options/rate-limit-options.js';
import type { Logger } from '../../ports.js';
import type { RateLimitCommands } from '../../redis/intake/rate-limit-commands.js';
import { isNoPermission } from '../../redis/replies/redis-errors.js';
import { StopSignal } from '../stop-signal.js';

export interface RateLimitNoticeDeps {
  /** Each rate-limited pattern's name (keyPrefix + pattern) and limit. */
  limits: ReadonlyMap<string, RateLimit>;
  commands: Pick<RateLimitCommands, 'publish'>;
  /** How often the records are written again (leaseRenewMs). */
  everyMs: number;
  /** How long a record outlives its last write (minIdleMs): a limit no worker runs any more disappears then. */
  ttlMs: number;
  logger: Logger;
}

/**
 * Writes every rate-limited pattern's limit where the dashboard reads it (RateLimitStateKeys), at once and
 * then every `everyMs`, beside the loops: the limit is only in the workers' options otherwise. A failure
 * (an ACL without +hset) costs no entry a delivery: it is logged once, and tried again at the next turn.
 */
export class RateLimitNotice {
  private readonly stopSignal = new StopSignal();
  private readonly done: Promise<void>;
  private lastFailure: string | undefined;

  constructor(private readonly d: RateLimitNoticeDeps) {
    this.done = lastValueFrom(
      defer(() => this.publishAll()).pipe(
        repeat({ delay: () => timer(d.everyMs).pipe(takeUntil(this.stopSignal.stopped$)) }),
        ignoreElements(),
      ),
      { defaultValue: undefined },
    );
  }

  /** No new write; waits for one in progress (bounded by commandTimeoutMs). */
  async stop(): Promise<void> {
    this.stopSignal.stop('stopping');
    await this.done;
  }

  private async publishAll(): Promise<void> {
    try {
      await Promise.all([...this.d.limits].map(([name, limit]) => this.d.commands.publish(name, limit, this.d.ttlMs)));
      this.lastFailure = undefined;
    } catch (err) {
      const failure = describeError(err);
      if (failure === this.lastFailure) return;
      this.lastFailure = failure;
      // The rights it takes, only when rights are what failed (not a server that did not answer).
      const rights = isNoPermission(err)
        ? '; the consumer needs +hset +pexpire on ~<keyPrefix><pattern>:rate* (docs/guide/security.md)'
        : '';
      this.d.logger.warn(
        `could not write the rate limits for the dashboard, tried again every ${this.d.everyMs} ms (logged again when the error changes): ${failure}${rights}`,
      );
    }
  }
}
