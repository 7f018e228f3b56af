/**
 * The tenure policies (consumer/tenure), against their interface on a real Redis: when a reader may
 * read (`reads$` around the steps it is given) and how its acks go. The steps are the test's: they
 * record that they ran; the ownership, the share-out and the fence are Redis'.
 */
import { defer, EMPTY, map, of, timer, type Observable, type Subscription } from 'rxjs';
import { AlwaysTenure } from '../libs/redis-streams/src/consumer/tenure/always.js';
import { PartitionTenure } from '../libs/redis-streams/src/consumer/tenure/partition-tenure.js';
import type { Tenure } from '../libs/redis-streams/src/consumer/tenure/tenure.js';
import type { StepResult } from '../libs/redis-streams/src/consumer/watch/loop-vitals.js';
import { resolveServerOptions } from '../libs/redis-streams/src/options/server-options.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { useRedis } from './support/use-redis.js';
import { useUnitLoops } from './support/unit-loop.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const loops = useUnitLoops(redis);
const running: Subscription[] = [];
afterEach(() => {
  for (const s of running.splice(0)) s.unsubscribe();
});

const step = (name: string): StepResult => ({ step: name as StepResult['step'], fetched: 0 });
const quiet = { log: () => {}, warn: () => {}, error: () => {} };

/** A tenure of `kind` for consumer `consumer` on `stream`, bound to a unit loop's parts; `ran` lists the steps it ran. */
function tenureOf(kind: 'always' | 'partition', stream: string, consumer: string) {
  const options = resolveServerOptions({
    connection: redis.url,
    group: 'g',
    consumer,
    telemetry: false,
    minIdleMs: 60_000,
    leaseRenewMs: 300,
  });
  const loop = loops.open({ streams: [stream], options: { consumer, minIdleMs: 60_000, leaseRenewMs: 300 } });
  const commands = new StreamCommands(loop.lanes.command, 'g');
  const deps = {
    stream,
    options,
    commands,
    durable: undefined,
    findings: { wake: () => {} },
    stop: loop.stop,
    logger: quiet,
    lastStepAt: () => performance.now(),
  };
  const tenure: Tenure =
    kind === 'always' ? new AlwaysTenure(deps) : new PartitionTenure({ ...deps, ordered: { pattern: 'p', partition: 0, partitions: 1 } });
  tenure.bind({
    custody: loop.custody,
    acks: loop.acks,
    decideOne: async (entry, source) => ({
      stream: entry.stream,
      id: entry.id,
      deliveryCount: entry.deliveryCount,
      source,
      outcome: 'acked',
    }),
    inProgress: new Set(),
    pause: { anyPaused: false } as never,
    parker: loop.parker(),
    offer: { ackDelete: undefined } as never,
  });
  const ran: string[] = [];
  const steps = {
    groups$: defer(() => (ran.push('groups'), of(step('groups')))),
    selfDrain$: defer(() => (ran.push('drain'), EMPTY)) as Observable<StepResult>,
    beat$: timer(20).pipe(map(() => (ran.push('beat'), step('park')))),
  };
  const state = { ended: false };
  const run = () => running.push(tenure.reads$(steps).subscribe({ complete: () => (state.ended = true) }));
  return { tenure, ran, run, loop, commands, state };
}

describe('AlwaysTenure', () => {
  it('self-drains, then beats until stopped; acks plainly; takes back and looks for handed entries; names no ordering', async () => {
    const stream = `${uniquePrefix()}s`;
    const t = tenureOf('always', stream, 'a');
    t.run();
    await waitFor(() => t.ran.filter((s) => s === 'beat').length >= 3, { message: 'beats after the drain' });
    expect(t.ran[0]).toBe('drain');
    expect(t.ran).not.toContain('groups');
    expect([t.tenure.claimsOnRead, t.tenure.looksForHanded, t.tenure.mayTakeBack(), t.tenure.settle, t.tenure.view()]).toEqual([
      true,
      true,
      true,
      undefined,
      undefined,
    ]);
    t.loop.stop.stop('stopping');
    const beats = t.ran.length;
    // The reads end at the next settle point: the beat in flight at most.
    await waitFor(() => t.state.ended, { message: 'the reads ended' });
    expect(t.ran.length).toBeLessThanOrEqual(beats + 1);
  });
});

describe('PartitionTenure (the ownership on a real Redis)', () => {
  it('one of two members owns the partition and runs the steps (takeover, groups, drain, beats); the other stands by, and takes over once the owner stops and releases', async () => {
    const stream = `${uniquePrefix()}s`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const a = tenureOf('partition', stream, 'a');
    const b = tenureOf('partition', stream, 'b');
    a.run();
    await waitFor(() => a.ran.includes('beat'), { message: 'the first member owns the partition' });
    b.run();
    // A member that joined asks for a share: with one partition, the owner keeps it while it beats.
    await waitFor(() => (b.tenure.view()?.members ?? 0) >= 2, { message: 'the second member seen by its own beat' });
    expect(b.ran).toEqual([]);
    expect(a.ran.slice(0, 2)).toEqual(['groups', 'drain']);
    expect(a.tenure.view()).toMatchObject({ owned: true, stream, pattern: 'p', partition: 0 });
    expect([a.tenure.claimsOnRead, a.tenure.looksForHanded, a.tenure.mayTakeBack()]).toEqual([false, false, true]);
    // As the reader does: the reads end (the owner key goes), then it finishes (it leaves the share-out), long
    // before its lease and membership (minIdleMs, a minute) would run out.
    a.loop.stop.stop('stopping');
    await waitFor(() => a.state.ended, { message: 'the reads ended' });
    await a.tenure.finish();
    await waitFor(() => b.ran.includes('beat'), { message: 'the standby takes over once the owner released' });
    expect(b.tenure.view()).toMatchObject({ owned: true });
    expect(a.tenure.view()).toMatchObject({ owned: false });
    // A former owner takes nothing back.
    expect(a.tenure.mayTakeBack()).toBe(false);
  });

  it("acks are fenced: a former owner's ack is refused, the owner's goes through", async () => {
    const stream = `${uniquePrefix()}s`;
    const r = redis.client();
    await r.xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const a = tenureOf('partition', stream, 'a');
    a.run();
    await waitFor(() => a.ran.includes('beat'), { message: 'a owns the partition' });
    const id = (await r.xadd(stream, '*', 'n', '1'))!;
    await r.xreadgroup('GROUP', 'g', 'a', 'COUNT', 1, 'STREAMS', stream, '>');
    const entry = { stream, id, fields: ['n', '1'], deliveryCount: 1 };
    a.loop.stop.stop('stopping');
    await waitFor(() => a.state.ended, { message: 'the reads ended' });
    await a.tenure.finish();
    expect(a.tenure.view()?.owned).toBe(false);
    await expect(a.tenure.ack([entry])).rejects.toThrow(/FENCED/);
    expect(Number((await r.xpending(stream, 'g'))[0])).toBe(1);
    const b = tenureOf('partition', stream, 'b');
    b.run();
    await waitFor(() => b.ran.includes('beat'), { message: 'b owns the partition' });
    await b.tenure.ack([entry]);
    expect(Number((await r.xpending(stream, 'g'))[0])).toBe(0);
  });
});
