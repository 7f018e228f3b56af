/**
 * Batch entries copied by the app (a pipe that normalizes payloads with spread, a handler that
 * maps entries before its bulk write): a copy keeps its context (an own property), so a
 * BatchFailure naming the copy fails that entry alone. A context made lazily behind a getter
 * was tried and lost this (24bac8c): copies had none.
 */
import { Controller, Injectable, UsePipes, type PipeTransform } from '@nestjs/common';
import { EventPattern, Payload } from '@nestjs/microservices';
import { BatchFailure, type StreamBatchEntry } from 'nestjs-redis-streams';
import { addOrders } from './support/batch-app.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { pendingCount } from './support/pending.js';

const redis = useRedis();
const start = useApps();

type Entry = StreamBatchEntry<{ order_id: string; normalized?: boolean }>;

/** A common pipe: validates/normalizes each payload, keeping the rest of the entry. */
@Injectable()
class NormalizePipe implements PipeTransform {
  transform(entries: Entry[]) {
    return entries.map((e) => ({ ...e, payload: { ...e.payload, normalized: true } }));
  }
}

@Injectable()
class Seen {
  ids: string[] = [];
  errors: string[] = [];
}

@Controller()
class PipedCtl {
  constructor(private readonly seen: Seen) {}
  @EventPattern('piped', { batch: { maxSize: 4, maxWaitMs: 5_000 } })
  @UsePipes(NormalizePipe)
  handle(@Payload() entries: Entry[]) {
    try {
      this.seen.ids.push(...entries.map((e) => e.context.getId()));
    } catch (err) {
      this.seen.errors.push(String(err));
    }
    // Row 2 is refused by the bulk write.
    throw new BatchFailure([{ entry: entries[2]!, error: new Error('row 2 refused') }]);
  }
}

@Controller()
class MappedCtl {
  @EventPattern('mapped', { batch: { maxSize: 4, maxWaitMs: 5_000 } })
  handle(@Payload() entries: Entry[]) {
    // The handler tags its rows before the bulk write, then names the refused ones.
    const rows = entries.map((e, i) => ({ ...e, row: i }));
    throw BatchFailure.of(
      rows.filter((r) => r.row === 1),
      new Error('row 1 refused'),
    );
  }
}

describe('batch handlers: copies of entries', () => {
  const opts = () => ({
    connection: redis.connection,
    group: 'g',
    consumer: 'c1',
    keyPrefix: uniquePrefix(),
    blockMs: 100,
    minIdleMs: 60_000,
  });

  it('a pipe that copies entries with spread: the handler still sees each context, and a BatchFailure naming one copy fails that entry alone', async () => {
    const app = await start(opts(), { controllers: [PipedCtl], providers: [Seen, NormalizePipe] });
    const ids = await addOrders(redis, app.key('piped'), 4);
    await waitFor(() => app.settled.length === 4, { message: 'four settled' });
    const seen = app.app.get(Seen);
    expect(seen.errors).toEqual([]);
    expect(seen.ids).toEqual(ids);
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect(ids.map((id) => outcome[id])).toEqual(['acked', 'acked', 'failed', 'acked']);
    expect(await pendingCount(redis, app.key('piped'))).toBe(1);
  });

  it('a handler that maps entries into tagged rows and fails some with BatchFailure.of(rows): only those stay pending', async () => {
    const app = await start(opts(), { controllers: [MappedCtl] });
    const ids = await addOrders(redis, app.key('mapped'), 4);
    await waitFor(() => app.settled.length === 4, { message: 'four settled' });
    const outcome = Object.fromEntries(app.settled.map((e) => [e.id, e.outcome]));
    expect(ids.map((id) => outcome[id])).toEqual(['acked', 'failed', 'acked', 'acked']);
    expect(await pendingCount(redis, app.key('mapped'))).toBe(1);
  });
});
