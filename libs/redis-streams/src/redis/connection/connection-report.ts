import { describeError } from '../../describe-error.js';
import type { Logger } from '../../ports.js';
import { failureReason } from '../../redact.js';
import type { LaneState } from './lane-state.js';
import { ParkLostError } from './park-watchdog.js';
import { isCommandTimeout, isConnectionLoss, isErrorReply } from '../replies/redis-errors.js';

/** How long an error seen while connected waits for the loss it usually announces, before it is told on its own. */
const ERROR_WITHOUT_LOSS_MS = 1000;

/** Where the connections stand, as the log has told it. */
type Phase = 'starting' | 'up' | 'down';

/**
 * Who saw a server stop answering: a reader's loop, or the checks a reader runs beside it (the owed-entry audit).
 * Only the same source ends it: a loop's step may ask Redis nothing (a local wait) or be a timed-out BLOCK that a
 * paused server still answers, so it cannot say that calls the checks saw fail are answered again.
 */
export type Witness = 'loop' | 'checks';

/**
 * The log of a set of connections (a consumer's, a client's): one line per change of state,
 * never one per reconnect attempt. "cannot connect to <url> (<cause>), retrying in N ms" or
 * "connection to <url> lost (<cause>), retrying in N ms" once; "still down" only when the cause
 * changes (ECONNREFUSED → WRONGPASS); "restored after N s" once. The cause is the connection's own
 * error, masked; the line waits for the first reconnect attempt that has one. A server that keeps
 * the connection but stops answering (frozen, paused) is a change of state too: "not answering
 * (<why>), retrying in N ms" once, "answering again after N s" once.
 */
export class ConnectionReport {
  private phase: Phase = 'starting';
  /** Since when the connections are down (or trying for the first time). */
  private downSince = Date.now();
  private cause: Error | undefined;
  /** The last connection error seen, kept past a recovery: what a command cut by the loss died of. */
  private lastCause: Error | undefined;
  /** The reason last logged for this outage; undefined: nothing logged yet. */
  private told: string | undefined;
  /** Since when the server, connected, has stopped answering (undefined: it answers). */
  private silentSince: number | undefined;
  /** Who saw it first (see Witness): only that one's answer ends it. */
  private silentFor: Witness = 'loop';

  constructor(
    /** The masked URL. */
    private readonly where: string,
    private readonly logger: Logger,
    /** The commands' deadline, which a timeout's line names. */
    private readonly commandTimeoutMs?: number,
  ) {}

  /**
   * A loop's failure that says the server does not answer (a command timed out, a park went
   * unanswered): told once per outage, with the next delay. True when it was such a failure.
   */
  notAnswering(error: unknown, retryInMs: number, by: Witness = 'loop'): boolean {
    const why = isCommandTimeout(error)
      ? `Command timed out${this.commandTimeoutMs === undefined ? '' : ` after ${this.commandTimeoutMs} ms`}`
      : error instanceof ParkLostError && /no answer/.test(error.message)
        ? error.message.replace(/^blocking read lost: /, '')
        : undefined;
    if (why === undefined) return false;
    if (this.silentSince !== undefined || this.phase !== 'up') return true;
    this.silentSince = Date.now();
    this.silentFor = by;
    this.told = why;
    this.logger.warn(`connection to ${this.where} not answering (${why}), retrying in ${retryInMs} ms`);
    return true;
  }

  /** A step of the loop (`by` the checks: a call of theirs) went through: a server that had stopped answering answers again. */
  answered(by: Witness = 'loop'): void {
    if (this.silentSince === undefined || this.phase !== 'up' || by !== this.silentFor) return;
    this.answeringAgain();
  }

  /** Not answering, as `by` saw it (and told): its next answer is what ends it. */
  silentTo(by: Witness): boolean {
    return this.silentSince !== undefined && this.phase === 'up' && this.silentFor === by;
  }

  /** Lost, or not connected yet with an attempt failed: connection errors are this report's to tell. */
  get down(): boolean {
    return this.phase === 'down' || (this.phase === 'starting' && this.cause !== undefined);
  }

  /** A failure of the reader's loop that is connection trouble: this report tells it (once per outage, with its cause), not the loop. */
  covers(error: unknown, retryable: boolean): boolean {
    return isConnectionLoss(error) || (this.down && retryable && !isErrorReply(error));
  }

  /** A connection's error (ioredis reports each failed attempt): the cause the next line gives. */
  failed(error: Error): void {
    this.cause = error;
    this.lastCause = error;
    // While up, an error no loss follows (a cluster's failed slot refresh) is told on its own, once per reason.
    if (this.phase === 'up') setTimeout(() => this.errorWhileUp(error), ERROR_WITHOUT_LOSS_MS).unref();
  }

  /** ioredis' "max retries per request" (or "Connection is closed.") as what it stands for: the connection's own last error. */
  explain(error: unknown): unknown {
    if (!isConnectionLoss(error)) return error;
    const last = this.lastCause ? ` (${this.lastCause.message})` : '';
    return new Error(`the connection was lost before Redis answered${last}`, { cause: error });
  }

  /** ioredis tries again in `delayMs` (its `reconnecting` event); the first after a loss has no cause yet (the next attempt's is). */
  retrying(delayMs: number | undefined): void {
    if (this.phase === 'up') return this.lost();
    if (!this.cause) return;
    const reason = failureReason(this.cause) ?? this.cause.message;
    if (reason === this.told) return;
    const next = delayMs === undefined ? 'retrying' : `retrying in ${delayMs} ms`;
    const cause = describeError(this.cause);
    if (this.told !== undefined) this.logger.warn(`connection to ${this.where} still down (${cause}), ${next}`);
    else if (this.phase === 'starting') this.logger.warn(`cannot connect to ${this.where} (${cause}), ${next}`);
    else this.logger.warn(`connection to ${this.where} lost (${cause}), ${next}`);
    this.told = reason;
  }

  /** The connections' folded state (ready only when all are). */
  stateChanged(state: LaneState): void {
    if (state !== 'ready' && this.phase === 'up') return this.lost();
    if (state !== 'ready' || this.phase === 'up') return;
    if (this.silentSince !== undefined) return this.answeringAgain();
    const after = `${((Date.now() - this.downSince) / 1000).toFixed(1)} s`;
    if (this.phase === 'down' && this.told === undefined)
      this.logger.log(`connection to ${this.where} dropped, and restored after ${after}`);
    else if (this.phase === 'down') this.logger.log(`connection to ${this.where} restored after ${after}`);
    else if (this.told !== undefined) this.logger.log(`connected to ${this.where} after ${after}`);
    this.phase = 'up';
    this.cause = undefined;
    this.told = undefined;
  }

  private errorWhileUp(error: Error): void {
    const reason = failureReason(error) ?? error.message;
    if (this.phase !== 'up' || this.cause !== error || reason === this.told) return;
    this.told = reason;
    this.logger.warn(`connection to ${this.where}: ${describeError(error)}`);
  }

  private answeringAgain(): void {
    this.logger.log(`connection to ${this.where} answering again after ${((Date.now() - this.silentSince!) / 1000).toFixed(1)} s`);
    this.phase = 'up';
    this.silentSince = undefined;
    this.cause = undefined;
    this.told = undefined;
  }

  private lost(): void {
    this.phase = 'down';
    // A silent server's connection dropped (by the park's watchdog): the same outage, already told.
    if (this.silentSince !== undefined) return void (this.cause = undefined);
    this.downSince = Date.now();
    this.cause = undefined;
    this.told = undefined;
  }
}
