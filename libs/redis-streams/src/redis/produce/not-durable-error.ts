import { brand } from '../../brand.js';
import { describeDurability, type ResolvedDurability } from '../../options/durability-options.js';
import { RedisStreamsError } from '../../redact.js';
import type { Confirmation } from './replication-wait.js';

/**
 * A write Redis took on the master that its replicas (or AOFs) did not confirm within the
 * durability's `timeoutMs`: the entry IS in the stream (or the schedule) under `id`, and can be
 * lost if the master fails before it replicates. Never a silent success: `emit`/`send` fail with
 * it. Writing the record again blindly makes a second entry; retry with an `idempotencyKey`.
 */
export class NotDurableError extends RedisStreamsError {
  constructor(
    /** The stream written to. */
    readonly stream: string,
    /** The entry's id (a delayed entry's schedule id). */
    readonly id: string,
    readonly wanted: ResolvedDurability,
    readonly confirmed: Confirmation,
    /** What was written: `entry` (XADD) or `scheduled` (a delayed entry waiting in the stream's schedule). */
    readonly written: 'entry' | 'scheduled' = 'entry',
  ) {
    const what = written === 'entry' ? `entry ${id}` : `delayed entry ${id} (in its schedule)`;
    const got = confirmed.refused
      ? `the wait was refused (${confirmed.refused})`
      : `${confirmed.replicas} of ${wanted.replicas} replica(s)${wanted.fsync ? ` fsynced it${confirmed.fsynced ? '' : ', the master did not'}` : ' confirmed it'} within ${wanted.timeoutMs} ms`;
    super(
      `nestjs-redis-streams: stream "${stream}": ${what} was written on the master, but not confirmed on ${describeDurability(wanted)}: ${got}. ` +
        'It can be lost if the master fails before it replicates. Writing it again makes a second entry: retry with an idempotencyKey',
      'NOTDURABLE',
      undefined,
    );
    this.name = 'NotDurableError';
  }
}
brand(NotDurableError, 'NotDurableError');
