import { brand } from '../brand.js';
import { resolveDurability, type Durability } from '../options/durability-options.js';
import { checkPriority } from '../options/priority-options.js';

/** A record's options: where it goes on a partitioned stream, and whether a repeat of it is written. */
export interface RecordOptions {
  /**
   * On a partitioned stream (the client's `partitions` option), entries with the same key go to
   * the same partition. Without one they are spread round-robin (or routed by `idempotencyKey`).
   * Written with the entry on every stream (field `partitionKey`): an ordered pattern
   * (`@StreamPattern(p, { ordered: true })`) handles one key's entries one at a time, in order.
   */
  partitionKey?: string;
  /**
   * At most one entry per key in the stream's window (the client's `idempotency` option): a repeat
   * writes nothing and resolves with the first entry's id. See docs/guide/producing.md.
   */
  idempotencyKey?: string;
  /**
   * Delayed delivery: the entry becomes visible to the stream's groups no earlier than this many
   * ms from now, on Redis' clock (it waits in the stream's schedule until then; docs/guide/flow-control.md).
   * `emit` then emits the scheduled entry's id (for `client.cancelScheduled`), not a stream entry id.
   */
  delayMs?: number;
  /** Delayed delivery at an absolute time (a `Date`, or Unix ms), on Redis' clock. Not with `delayMs`. */
  deliverAt?: Date | number;
  /**
   * This record's durable produce, in place of the client's `durability` (`false`: none, even when
   * the client has one): the write resolves once on that many replicas (fsynced), else fails with
   * `NotDurableError` carrying its id. See docs/guide/producing.md.
   */
  durability?: Durability | false;
  /**
   * The record's priority level, 0 (the default) to 9: level k > 0 is written to the stream's level stream
   * (`<stream>:prio:<k>`), which a pattern with `priorities: { levels }` above k reads before the lower ones
   * (docs/guide/priorities.md). A pattern without levels (or fewer) never reads it: give the pattern its levels first.
   */
  priority?: number;
}

/** Longest delay a record may ask for: 10 years (a typo of units, not a schedule). */
export const MAX_DELAY_MS = 10 * 365 * 86_400_000;

/** The due time a record asks for (`{ in: ms }` or `{ at: unixMs }`), validated; undefined when it asks for none. */
export function dueTimeOf(options: RecordOptions): { in: number } | { at: number } | undefined {
  const { delayMs, deliverAt } = options;
  if (delayMs !== undefined && deliverAt !== undefined) throw new TypeError('delayMs and deliverAt: give one of them, not both');
  if (delayMs !== undefined) {
    if (typeof delayMs !== 'number' || !Number.isInteger(delayMs) || delayMs < 0 || delayMs > MAX_DELAY_MS)
      throw new TypeError(`delayMs must be a whole number of ms from 0 to ${MAX_DELAY_MS} (10 years), got ${describe(delayMs)}`);
    return { in: delayMs };
  }
  if (deliverAt === undefined) return undefined;
  const at = deliverAt instanceof Date ? deliverAt.getTime() : deliverAt;
  if (typeof at !== 'number' || !Number.isInteger(at) || at < 0 || at > Date.now() + MAX_DELAY_MS)
    throw new TypeError(`deliverAt must be a Date or whole Unix ms, at most 10 years ahead, got ${describe(deliverAt)}`);
  return { at };
}

function describe(value: unknown): string {
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'an invalid Date' : value.toISOString();
  return typeof value === 'number' ? String(value) : typeof value;
}

/**
 * A payload with entry headers, for `client.emit(pattern, record)` / `client.send(pattern, record)`.
 * The consumer reads the headers with `ctx.getHeaders()`.
 *
 *   client.emit('orders', new RedisStreamsRecord(order, { traceId }))
 *   client.emit('orders', new RedisStreamsRecord(order, {}, { partitionKey: order.customerId }))
 *   client.emit('orders', new RedisStreamsRecord(order, {}, { idempotencyKey: `order-${order.id}` }))
 *   client.emit('reminders', new RedisStreamsRecord(reminder, {}, { delayMs: 60_000 }))
 */
export class RedisStreamsRecord<T = unknown> {
  constructor(
    readonly data: T,
    readonly headers: Record<string, string> = {},
    readonly options: RecordOptions = {},
  ) {
    if (options.priority !== undefined) checkPriority(options.priority);
    if (options.partitionKey !== undefined && typeof options.partitionKey !== 'string') {
      throw new TypeError(`partitionKey must be a string, got ${typeof options.partitionKey}`);
    }
    // Redis refuses an empty IDMP id; a non-string would be written as whatever String() makes of it.
    if (options.idempotencyKey !== undefined && (typeof options.idempotencyKey !== 'string' || options.idempotencyKey === '')) {
      const got = typeof options.idempotencyKey === 'string' ? 'an empty string' : typeof options.idempotencyKey;
      throw new TypeError(`idempotencyKey must be a non-empty string, got ${got}`);
    }
    dueTimeOf(options);
    resolveDurability('durability', options.durability);
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== 'string') throw new TypeError(`header "${name}" must be a string, got ${typeof value}`);
    }
  }
}
brand(RedisStreamsRecord, 'RedisStreamsRecord');
