import { EventEmitter } from 'node:events';
import type { SettledEvent } from '../consumer/settle/settled-event.js';
import { describeError } from '../describe-error.js';
import type { Logger } from '../ports.js';
import { counted } from '../readable.js';
import { carriesCommand, redactError } from '../redact.js';
import type { RedisStreamsEvents } from './events.js';

/**
 * The engine's public events (`on(...)`, {@link RedisStreamsEvents}): what a Redis error carries is
 * scrubbed before a listener sees it, and a listener's throw is logged, never let through to the loop that emitted.
 */
export class EngineEvents {
  private readonly emitter = new EventEmitter();
  /** A 'settled' listener was added (listeners are never removed): read per entry, a field rather than the emitter's lookup. */
  private settledHeard = false;

  constructor(
    private readonly logger: Logger,
    /** What no event may carry (passwords). */
    private readonly secrets: readonly string[],
  ) {}

  on<K extends keyof RedisStreamsEvents>(event: K, callback: RedisStreamsEvents[K]): void {
    this.emitter.on(event as string, callback);
    if (event === 'settled') this.settledHeard = true;
  }

  /** An entry the loop finished with. */
  settled(event: SettledEvent): void {
    // Once per entry: nothing to build while nobody listens.
    if (!this.settledHeard) return;
    // A Redis failure (a refused XACK, a reply write) carries its command: scrubbed; a handler's error is the app's own.
    this.emit('settled', carriesCommand(event.error) ? { ...event, error: redactError(event.error, undefined, this.secrets) } : event);
  }

  /** Pending entries of `stream` deleted before they were acked: logged as the data loss it is, and told. */
  readonly deleted = (stream: string, ids: string[]): void => {
    this.logger.error(
      `${counted(ids.length, 'pending entry', 'pending entries')} of "${stream}" ${ids.length === 1 ? 'was' : 'were'} deleted before ${ids.length === 1 ? 'it was' : 'they were'} acked (data loss): ${ids.join(', ')}`,
    );
    this.emit('deleted', stream, ids);
  };

  /** `consumerCleanup` deleted these consumers of the group on `stream` (hygiene.ts logs it). */
  readonly consumersDeleted = (stream: string, names: string[]): void => this.emit('consumersDeleted', stream, names);

  /** A Redis call of a loop failed (`error`, scrubbed by the caller); it retries after `retryInMs`. */
  loopFailed(error: unknown, retryInMs: number): void {
    this.emit('error', error, retryInMs);
  }

  private emit(event: string, ...args: unknown[]): void {
    // EventEmitter throws an 'error' nobody listens to; the loop already logged it.
    if (this.emitter.listenerCount(event) === 0) return;
    try {
      this.emitter.emit(event, ...args);
    } catch (err) {
      // A listener's bug must not stop the loop.
      this.logger.error(`"${event}" listener threw: ${describeError(err)}`);
    }
  }
}
