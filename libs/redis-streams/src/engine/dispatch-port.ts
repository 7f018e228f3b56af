import type { DecodedEntry } from '../codec/entry-codec.js';
import type { DispatchBatch } from '../consumer/settle/decide-batch.js';
import type { EntryContextArgs } from '../consumer/settle/entry-context.js';
import type { StreamCommands } from '../redis/stream-commands.js';

/** What a host may send to Redis: a request's reply, nothing else. */
export type ReplySender = Pick<StreamCommands, 'reply'>;

/** How the engine calls the app's handlers: the host builds its contexts and writes request replies. */
export interface DispatchPort {
  /** One entry; see `Dispatch` in consumer/settle/decide.ts. A request's reply goes through `replies`. */
  dispatch(pattern: string, entry: DecodedEntry, args: EntryContextArgs, replies: ReplySender): Promise<unknown>;
  dispatchBatch: DispatchBatch;
}
