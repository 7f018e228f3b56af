import type { Logger } from '../ports.js';

/** How often, per stream, the entries left to the group are logged at most. */
export const LEFT_TO_GROUP_LOG_EVERY_MS = 60_000;

/**
 * The warning for waiting entries left to the group past maxWaitingRetries. Redis holds no idle
 * time in the future, so an entry due later than minIdleMs comes back to a reclaim every
 * minIdleMs, and is left again: once per stream a minute, with how many were left meanwhile,
 * not once per reclaim round.
 */
export class LeftToGroupLog {
  private readonly lines = new Map<string, { at: number; left: number }>();

  constructor(
    private readonly logger: Logger,
    private readonly maxWaitingRetries: number,
  ) {}

  note(stream: string, left: number): void {
    const now = Date.now();
    const last = this.lines.get(stream);
    if (last && now - last.at < LEFT_TO_GROUP_LOG_EVERY_MS) {
      last.left += left;
      return;
    }
    const since = last && last.left > 0 ? ` (and ${last.left} more since the last such line)` : '';
    this.lines.set(stream, { at: now, left: 0 });
    this.logger.warn(
      `${left} entries taken from "${stream}" wait for a retry, past this consumer's maxWaitingRetries (${this.maxWaitingRetries}): left to the group, a reclaim takes each at its due time${since}; one due later than minIdleMs comes back each minIdleMs until then (logged at most once a minute)`,
    );
  }
}
