import type { ResolvedDurability } from '../../options/durability-options.js';

/** What the replicas (and AOFs) confirmed of the writes before a wait. */
export interface Confirmation {
  /** Replicas that acknowledged them (WAIT), or fsynced them (WAITAOF). */
  replicas: number;
  /** The master fsynced them to its AOF (WAITAOF's local count); undefined when not asked. */
  fsynced?: boolean;
  /** Why the wait itself failed (WAITAOF refused: no AOF, an old server), when it did. */
  refused?: string;
}

/** A command as sent raw (`conn.call` / a pipeline's `call`): its name, then its arguments. */
export type RawCommand = readonly [name: string, ...args: (string | number | Buffer)[]];

/**
 * The wait that follows durable writes on their connection: `WAIT <replicas> <timeout>`, or with
 * fsync `WAITAOF 1 <replicas> <timeout>`. Either covers every write the connection sent before it
 * (and so, replication being one ordered stream, every write of anyone the master took before those).
 * Neither may run inside MULTI or a script.
 */
export function waitCommand(d: ResolvedDurability): RawCommand {
  return d.fsync ? ['WAITAOF', 1, d.replicas, d.timeoutMs] : ['WAIT', d.replicas, d.timeoutMs];
}

/** Whether what came back meets what was asked. */
export function confirms(d: ResolvedDurability, c: Confirmation): boolean {
  return c.refused === undefined && c.replicas >= d.replicas && (!d.fsync || c.fsynced === true);
}
