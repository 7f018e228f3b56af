import type { DeliverySource } from '../redis/stream-entry.js';

export type SettleOutcome =
  /** The handler succeeded and the entry was acked. */
  | 'acked'
  /** The handler failed (or timed out): the entry stays pending and comes back through reclaim. */
  | 'failed'
  /** Moved to the dead-letter stream and acked: poison, undecodable, too large, or refused by the handler. */
  | 'dead-lettered';

export interface SettledEvent {
  stream: string;
  id: string;
  outcome: SettleOutcome;
  deliveryCount: number;
  source: DeliverySource;
  error?: unknown;
  /** Id of the entry in the dead-letter stream, when `outcome` is `'dead-lettered'`. */
  deadLetterId?: string;
}

/** Events of `server.on(...)`; statuses travel through `server.status`. */
export interface RedisStreamsEvents {
  /** Every entry the loop finished with, whatever the outcome. */
  settled: (event: SettledEvent) => void;
  /** Entries XAUTOCLAIM reported as pending but deleted from the stream (trimmed): their work is lost. */
  deleted: (stream: string, ids: string[]) => void;
  /** A Redis call of the loop failed; it retries after `retryInMs`. */
  error: (error: unknown, retryInMs: number) => void;
  /** Index signature required by Nest's `Server` events map. */
  [event: string]: (...args: any[]) => void;
}
