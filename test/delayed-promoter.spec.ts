/**
 * DelayedPromoter (consumer/upkeep/delayed-promoter.ts) against its interface on a real Redis: delayed
 * entries move into their stream once due by Redis' clock, never before, once each however many workers
 * look; its looks$ come back when the next one is due; a stream that refuses them is said once.
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from 'rxjs';
import { DelayedPromoter } from '../libs/redis-streams/src/consumer/upkeep/delayed-promoter.js';
import { DelayedCommands } from '../libs/redis-streams/src/redis/upkeep/delayed-commands.js';
import { captureLogs } from './support/logs.js';
import { redisNow } from './support/redis-clock.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const looking: Subscription[] = [];
afterEach(() => {
  for (const s of looking.splice(0)) s.unsubscribe();
});

/** A worker's promoter of `streams` on a connection of its own (`checkMs`: a minute unless asked). */
function promoterOf(streams: readonly string[], checkMs = 60_000) {
  const { logger, lines } = captureLogs();
  const promoter = new DelayedPromoter({ delayed: new DelayedCommands(redis.newClient(), false), streams, checkMs, logger });
  return { promoter, lines };
}

const producer = () => new DelayedCommands(redis.client(), false);
const schedule = (stream: string, due: { in: number } | { at: number }, n = '1') =>
  producer().schedule(stream, randomUUID(), ['n', n], due);

describe('DelayedPromoter', () => {
  it("moves an entry once it is due by Redis' clock, and not before (each look compared with Redis' TIME around it)", async () => {
    const stream = `${uniquePrefix()}s`;
    const { dueAt } = await schedule(stream, { in: 1000 });
    const { promoter } = promoterOf([stream]);
    const looks: { before: number; moved: number; after: number }[] = [];
    await waitFor(
      async () => {
        const before = await redisNow(redis.client());
        const moved = await promoter.look();
        looks.push({ before, moved, after: await redisNow(redis.client()) });
        return moved === 1;
      },
      { message: 'the due entry moved in' },
    );
    // Not moved: each such look began before its due time. Moved: the look ended at or after it.
    const waited = looks.slice(0, -1);
    expect(waited.length).toBeGreaterThan(0);
    for (const look of waited) expect([look.moved, look.before < dueAt]).toEqual([0, true]);
    expect(looks.at(-1)!.after).toBeGreaterThanOrEqual(dueAt);
    expect((await redis.client().xrange(stream, '-', '+')).map(([, fields]) => fields)).toEqual([['n', '1']]);
    expect(promoter.view(stream)).toEqual({ waiting: 0, nextDueInMs: undefined });
  });

  it('an entry due later waits, seen by the view; one past due moves at the first look', async () => {
    const stream = `${uniquePrefix()}s`;
    const now = await redisNow(redis.client());
    await schedule(stream, { at: now + 60_000 }, 'later');
    await schedule(stream, { at: now - 1 }, 'past');
    const { promoter } = promoterOf([stream]);
    expect(promoter.view(stream)).toBeUndefined();
    expect(await promoter.look()).toBe(1);
    const view = promoter.view(stream)!;
    expect(view.waiting).toBe(1);
    expect(view.nextDueInMs).toBeGreaterThan(50_000);
    expect(view.nextDueInMs).toBeLessThanOrEqual(60_000);
    expect((await redis.client().xrange(stream, '-', '+')).map(([, f]) => f[1])).toEqual(['past']);
  });

  it('two workers looking at once move each due entry once, past one call’s budget (250 entries)', async () => {
    const stream = `${uniquePrefix()}s`;
    const now = await redisNow(redis.client());
    for (let i = 0; i < 250; i++) await schedule(stream, { at: now - 1 }, String(i));
    const [a, b] = [promoterOf([stream]), promoterOf([stream])];
    const moved = await Promise.all([a.promoter.look(), b.promoter.look()]);
    expect(moved[0] + moved[1]).toBe(250);
    expect(await redis.client().xlen(stream)).toBe(250);
    expect(await a.promoter.look()).toBe(0);
  });

  it('its looks$ come back when the next known entry is due, long before checkMs', async () => {
    const stream = `${uniquePrefix()}s`;
    await schedule(stream, { in: 300 });
    const { promoter } = promoterOf([stream], 60_000);
    looking.push(promoter.looks$.subscribe());
    await waitFor(async () => (await redis.client().xlen(stream)) === 1, { message: 'moved in at its due time' });
  });

  it('a stream that refuses its due entries (another type): they wait, said once, and move once it takes them', async () => {
    const stream = `${uniquePrefix()}s`;
    await redis.client().set(stream, 'not a stream');
    const now = await redisNow(redis.client());
    await schedule(stream, { at: now - 1 });
    const { promoter, lines } = promoterOf([stream]);
    expect(await promoter.look()).toBe(0);
    expect(await promoter.look()).toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^error delayed entries of "${stream}" cannot be moved in: .*WRONGTYPE.*; they wait`));
    expect(promoter.view(stream)?.waiting).toBe(1);
    await redis.client().del(stream);
    expect(await promoter.look()).toBe(1);
  });
});
