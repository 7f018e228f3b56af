import type { DeliverySource } from '../redis/stream-entry.js';

export type SettleOutcome =
  /** The handler succeeded and the entry was acked. */
  | 'acked'
  /** The handler failed: the entry stays pending and comes back through reclaim. */
  | 'failed'
  /** The entry cannot be turned into a payload: it stays pending (dead-lettering comes later). */
  | 'undecodable';

export interface SettledEvent {
  stream: string;
  id: string;
  outcome: SettleOutcome;
  deliveryCount: number;
  source: DeliverySource;
  error?: unknown;
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
