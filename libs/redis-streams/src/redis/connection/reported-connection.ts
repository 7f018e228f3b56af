import type { Subscription } from 'rxjs';
import { guardLogger } from '../../guarded-logger.js';
import { describeError } from '../../describe-error.js';
import { describeConnection, secretsOf, type ResolvedConnection } from '../../options/connection.js';
import type { Logger } from '../../ports.js';
import { redactError } from '../../redact.js';
import { closeConnection, openCommandConnection, type RedisConnection } from './connect.js';
import { ConnectionReport } from './connection-report.js';
import { watchState } from './lane-state.js';
import { explainConnectionError, isCommandTimeout, isHandshakeRefusal, withNodeCause } from '../replies/redis-errors.js';

/**
 * A long-lived command connection of a tool's own (the dashboard module's): its trouble told through
 * `logger` once per change of state, as a consumer's is (ConnectionReport), never ioredis' "Unhandled
 * error event" once per reconnect attempt; its last error kept, masked, to say why a call got no answer.
 */
export class ReportedConnection {
  readonly conn: RedisConnection;
  /** The connection's last error (masked) while it is not ready; undefined once it is. */
  private lastError: Error | undefined;
  private readonly states: Subscription;

  constructor(
    connection: ResolvedConnection,
    name: string,
    logger: Logger,
    /** Each command's deadline. */
    private readonly commandTimeoutMs: number,
  ) {
    const secrets = secretsOf(connection);
    // Its lines come from ioredis' events: a logger that throws there must cost the line, not the process.
    const report = new ConnectionReport(describeConnection(connection), guardLogger(logger), commandTimeoutMs);
    this.conn = openCommandConnection(connection, name, commandTimeoutMs);
    // The listener ioredis wants: without one it prints each failed attempt, AUTH arguments and all.
    this.conn.on('error', (failure: Error) => {
      this.lastError = redactError(explainConnectionError(withNodeCause(failure)), undefined, secrets);
      report.failed(this.lastError);
    });
    this.conn.on('reconnecting', (delayMs?: number) => report.retrying(delayMs));
    this.states = watchState(this.conn).subscribe((state) => {
      if (state === 'ready') this.lastError = undefined;
      report.stateChanged(state);
    });
  }

  /**
   * Why a call got no answer (an error `isUnanswered` accepts, or the handshake's refusal), in words
   * for its caller: the connection's own last error while it is down (ECONNREFUSED, WRONGPASS …: ioredis' own says
   * only "max retries per request"), else the deadline that passed, else that the connection went.
   */
  unanswered(err: unknown): string {
    if (isHandshakeRefusal(err)) return describeError(err);
    if (this.lastError && this.conn.status !== 'ready') return describeError(this.lastError);
    if (isCommandTimeout(err)) return `no answer within ${this.commandTimeoutMs} ms`;
    return 'the connection was lost';
  }

  /** QUIT (or a disconnect when Redis does not answer); nothing of it is told after. */
  async close(): Promise<void> {
    await closeConnection(this.conn);
    this.states.unsubscribe();
  }
}
