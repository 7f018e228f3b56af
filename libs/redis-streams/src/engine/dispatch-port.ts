import type { DecodedEntry } from '../codec/entry-codec.js';
import type { DispatchBatch } from '../consumer/decide-batch.js';
import type { EntryContextArgs } from '../consumer/entry-context.js';
import type { StreamCommands } from '../redis/stream-commands.js';

/** How the engine calls the app's handlers: the host (the Nest adapter) builds its contexts and writes request replies. */
export interface DispatchPort {
  /** One entry; see `Dispatch` in consumer/decide.ts. Replies go through `commands`. */
  dispatch(pattern: string, entry: DecodedEntry, args: EntryContextArgs, commands: StreamCommands): Promise<unknown>;
  dispatchBatch: DispatchBatch;
}
