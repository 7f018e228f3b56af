import type { SettledEvent } from '../consumer/settle/settled-event.js';

/** Events of `server.on(...)`; statuses travel through `server.status`. */
export interface RedisStreamsEvents {
  /** Every entry the loop finished with, whatever the outcome. */
  settled: (event: SettledEvent) => void;
  /** Entries XAUTOCLAIM reported as pending but deleted from the stream (trimmed): their work is lost. */
  deleted: (stream: string, ids: string[]) => void;
  /** `consumerCleanup` deleted these consumers of the group (idle, owning nothing) on `stream`. */
  consumersDeleted: (stream: string, consumers: string[]) => void;
  /** A Redis call of the loop failed; it retries after `retryInMs`. */
  error: (error: unknown, retryInMs: number) => void;
  /** Index signature required by Nest's `Server` events map. */
  [event: string]: (...args: any[]) => void;
}
