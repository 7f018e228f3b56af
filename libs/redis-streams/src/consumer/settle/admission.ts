import type { DecodedEntry } from '../../codec/entry-codec.js';
import type { StreamEntry } from '../../stream-entry.js';

/**
 * An entry a gate holds back as it is about to start: tried again in `retryInMs`, its delivery not
 * counted (the retry schedule reads `rateLimited` and `retryInMs`, as of a handler's RateLimitedException).
 * Each gate has its own subclass, whose name is the `error.type` the settle metrics report.
 */
export class NotYet extends Error {
  override name = 'NotYet';
  readonly rateLimited = true;

  constructor(
    readonly retryInMs: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The port a settle step consults after its own checks (deliveries, size, decoding) and before the
 * handler runs; intake/ implements it (the key rate gate, the pattern throttle): deciding knows no flow control.
 */
export interface Admission {
  /**
   * undefined: the entry starts now. A NotYet: it waits its turn, its delivery not counted. Throws
   * when the entry can never pass as it is (a key function that threw): it fails as its handler's
   * error would. A rejection is Redis failing: the loop's way.
   */
  pass(entry: StreamEntry, decoded: DecodedEntry): undefined | Promise<NotYet | undefined>;
  /**
   * A handler's RateLimitedException on an entry that passed here: what it slows, named for the log
   * line, and its slowing for `ms` in every worker of the group; undefined when it slows nothing.
   */
  slow(entry: StreamEntry, ms: number): { what: string; slowed: Promise<void> } | undefined;
}
