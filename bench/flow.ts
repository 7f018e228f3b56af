// The flow-control section of `npm run bench` (`--only flow` alone): what delayed delivery costs and how late it is.
// - Lateness: `entries` delayed entries (delays spread evenly over `spreadMs`, all scheduled up front) and, in the
//   same run, a "scheduled late" series (short delays written all along, each one due sooner than every entry a
//   worker knew of at its last look: the worst case, found at the next look) and plain entries written all along (the
//   reference: a plain entry's delivery latency). Two StreamConsumers with the default options (flowCheckMs 1000,
//   blockMs 5000). Per entry: the promotion's lateness on Redis' clock (its stream id's time − its due time, both
//   Redis', so exact) and the handler's (the handler's clock − the due time, this host's clock corrected by its offset
//   from Redis' TIME: loopback, one host).
// - Promotion cost with W entries waiting (1,000 and 1,000,000, due in a day): Redis' own time per look that moves
//   nothing (INFO commandstats, usec per EVALSHA) and per entry moved (10,000 due entries on top), and the memory
//   per waiting entry (used_memory before and after the fill, a ~60-byte payload). The 1,000,000 / 1,000 ratios say
//   whether a look costs O(waiting): ~1× means it does not.
// Nothing asserts a time; `problems` lists runs that lost an entry, delivered one twice, or delivered one early.
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { DelayedCommands, delayedKeysOf, RedisStreamsClient, RedisStreamsRecord } from 'nestjs-redis-streams';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import { waitFor } from '../test/support/wait-for.js';

type Log = (line: string) => void;

/** Entries one look's script moves (the worker's PROMOTE_BATCH). */
const PROMOTE_BATCH = 100;

export const flowSizes = (smoke: boolean) => ({
  entries: smoke ? 200 : 10_000,
  spreadMs: smoke ? 3_000 : 60_000,
  /** The "scheduled late" series and the plain reference: one of each every this many ms over the spread. */
  everyMs: smoke ? 100 : 50,
  waiting: smoke ? [1_000, 20_000] : [1_000, 1_000_000],
  dueOnTop: smoke ? 1_000 : 10_000,
  idleLooks: smoke ? 200 : 2_000,
  /** Rate limits: the limit (per second), how long each accuracy run lasts, and the overhead drain's size. */
  // A multiple of the 4 keys: each key's limit must be a whole number (rate-limit options refuse 12.5).
  rateMax: smoke ? 48 : 200,
  rateRunMs: smoke ? 2_000 : 10_000,
  overheadEntries: smoke ? 2_000 : 20_000,
  /** Entries scheduled one at a time with nothing else waiting. */
  alone: smoke ? 5 : 30,
});

export interface Distribution {
  count: number;
  p50: number;
  p99: number;
  max: number;
  min: number;
}

export interface FlowSection {
  smoke: boolean;
  sizes: ReturnType<typeof flowSizes>;
  lateness: {
    /** Up front: promotion (stream id − due) and handler (handler start − due), ms. */
    promoted: Distribution;
    handled: Distribution;
    /** Scheduled all along with short delays: the handler's lateness. */
    lateScheduled: Distribution;
    /** Short delays with nothing else waiting: found at the next look. */
    alone: Distribution;
    /** Plain entries: XADD → handler, ms (the reference). */
    plain: Distribution;
  };
  cost: { waiting: number; idleLookUs: number; movedUsPerEntry: number; bytesPerWaiting: number; valueBytes: number }[];
  /** Rate limits: entries started per second against the limit, with 1 and 4 workers. */
  rates: { workers: number; limitPerSec: number; measuredPerSec: number; seconds: number }[];
  /** Per key: 4 keys each limited to a quarter of the limit; each key's started per second (the slowest and fastest), with 1 and 4 workers. */
  keyRates: {
    workers: number;
    limitPerSec: number;
    keys: number;
    slowestPerSec: number;
    fastestPerSec: number;
    seconds: number;
    /** Scripts Redis ran (EVALSHA: grants, retry records, claims) per entry started: what refusals cost. */
    scriptsPerStart: number;
  }[];
  /** A drain with a limit far above its rate against the same drain without one (msgs/s each, median of runs). */
  overhead: { unlimited: number[]; limited: number[] };
  problems: string[];
}

const dist = (xs: number[]): Distribution => {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
  return { count: s.length, p50: at(0.5), p99: at(0.99), max: s[s.length - 1] ?? NaN, min: s[0] ?? NaN };
};

/** Redis' clock in ms, to the µs. */
async function redisNow(redis: Redis): Promise<number> {
  const [s, us] = (await redis.time()) as [string | number, string | number];
  return Number(s) * 1000 + Number(us) / 1000;
}

/** This host's clock in ms, to the µs. */
const hostNow = () => performance.timeOrigin + performance.now();

/** Redis' clock − this host's, from the round trip of the calls with the least delay (loopback: tens of µs). */
async function clockOffset(redis: Redis): Promise<number> {
  let best = { rtt: Infinity, offset: 0 };
  for (let i = 0; i < 50; i++) {
    const before = hostNow();
    const redisMs = await redisNow(redis);
    const after = hostNow();
    if (after - before < best.rtt) best = { rtt: after - before, offset: redisMs - (before + after) / 2 };
  }
  return best.offset;
}

export async function benchFlow(o: { smoke: boolean; url: string; log: Log }): Promise<FlowSection> {
  const sizes = flowSizes(o.smoke);
  const admin = new Redis(o.url);
  const problems: string[] = [];
  try {
    const lateness = await latency(o, admin, sizes, problems);
    const cost = [];
    for (const waiting of sizes.waiting) cost.push(await promotionCost(o, admin, waiting, sizes));
    const rates = [];
    for (const workers of [1, 4]) rates.push(await rateAccuracy(o, admin, workers, sizes));
    const keyRates = [];
    for (const workers of [1, 4]) keyRates.push(await keyRateAccuracy(o, admin, workers, sizes));
    const overhead = { unlimited: [] as number[], limited: [] as number[] };
    // The two take turns, twice each.
    for (let round = 0; round < 2; round++)
      for (const limited of round % 2 === 0 ? [false, true] : [true, false])
        (limited ? overhead.limited : overhead.unlimited).push(await drain(o, admin, sizes.overheadEntries, limited));
    return { smoke: o.smoke, sizes, lateness, cost, rates, keyRates, overhead, problems };
  } finally {
    admin.disconnect();
  }
}

async function latency(o: { url: string; log: Log }, admin: Redis, sizes: ReturnType<typeof flowSizes>, problems: string[]) {
  const offset = await clockOffset(admin);
  const seen = new Map<string, { idMs: number; at: number }>();
  let twice = 0;
  const handle = (p: { kind: string; i: number }, ctx: { getId(): string }) => {
    const key = `${p.kind}:${p.i}`;
    if (seen.has(key)) twice++;
    seen.set(key, { idMs: Number(ctx.getId().split('-')[0]), at: hostNow() + offset });
  };
  const workers = ['w1', 'w2'].map((consumer) =>
    new StreamConsumer({ connection: o.url, group: 'bench', consumer, logger: false, concurrency: 16 }).handle('flow', handle),
  );
  const client = new RedisStreamsClient({ connection: o.url });
  await client.connect();
  try {
    await Promise.all(workers.map((w) => w.start()));
    const keys = delayedKeysOf('flow', false);
    const due = new Map<string, number>();
    o.log(`flow: scheduling ${sizes.entries} delayed entries due over ${sizes.spreadMs / 1000} s`);
    for (let from = 0; from < sizes.entries; from += 500) {
      const ids = await Promise.all(
        Array.from({ length: Math.min(500, sizes.entries - from) }, (_, k) => {
          const i = from + k;
          const delayMs = 1000 + Math.floor((i / sizes.entries) * sizes.spreadMs);
          return lastValueFrom(client.emit('flow', new RedisStreamsRecord({ kind: 'up', i }, {}, { delayMs }))) as Promise<string>;
        }),
      );
      const scores = (await admin.zmscore(keys.schedule, ...ids)) as (string | null)[];
      ids.forEach((_, k) => due.set(`up:${from + k}`, Number(scores[k])));
    }
    // All along: a plain entry (the reference) and a short-delayed one, each written one after another.
    const written = new Map<string, number>();
    const end = Date.now() + sizes.spreadMs;
    let n = 0;
    o.log('flow: plain and late-scheduled entries all along');
    while (Date.now() < end) {
      const i = n++;
      written.set(`plain:${i}`, hostNow() + offset);
      await lastValueFrom(client.emit('flow', new RedisStreamsRecord({ kind: 'plain', i })));
      const id = (await lastValueFrom(
        client.emit('flow', new RedisStreamsRecord({ kind: 'late', i }, {}, { delayMs: 100 + (i % 5) * 100 })),
      )) as string;
      due.set(`late:${i}`, Number(await admin.zscore(keys.schedule, id)));
      await new Promise((resolve) => setTimeout(resolve, sizes.everyMs)); // the series' pace, not a wait for a condition
    }
    let total = sizes.entries + 2 * n;
    await waitFor(() => seen.size >= total, { message: `${total} entries handled`, timeoutMs: 30_000, intervalMs: 100 });
    // Alone: nothing else waits, so each is found at the next look (the worst case: up to flowCheckMs late).
    o.log('flow: short delays with nothing else scheduled');
    for (let i = 0; i < sizes.alone; i++) {
      const id = (await lastValueFrom(client.emit('flow', new RedisStreamsRecord({ kind: 'alone', i }, {}, { delayMs: 100 })))) as string;
      due.set(`alone:${i}`, Number(await admin.zscore(keys.schedule, id)));
      await waitFor(() => seen.has(`alone:${i}`), { message: `alone ${i} handled`, intervalMs: 5 });
      await new Promise((resolve) => setTimeout(resolve, 37 * (i % 7))); // spreads the writes across the look period, not a wait for a condition
    }
    total += sizes.alone;
    if (twice > 0) problems.push(`${twice} entries handled twice`);
    const promoted: number[] = [];
    const handled: number[] = [];
    const lateScheduled: number[] = [];
    const alone: number[] = [];
    const plain: number[] = [];
    for (const [key, s] of seen) {
      if (key.startsWith('plain:')) plain.push(s.at - written.get(key)!);
      else if (key.startsWith('late:')) lateScheduled.push(s.at - due.get(key)!);
      else if (key.startsWith('alone:')) alone.push(s.at - due.get(key)!);
      else {
        promoted.push(s.idMs - due.get(key)!);
        handled.push(s.at - due.get(key)!);
      }
    }
    const early = [...seen].filter(([key, s]) => !key.startsWith('plain:') && s.idMs < due.get(key)!).length;
    if (early > 0) problems.push(`${early} delayed entries became visible before their due time`);
    return {
      promoted: dist(promoted),
      handled: dist(handled),
      lateScheduled: dist(lateScheduled),
      alone: dist(alone),
      plain: dist(plain),
    };
  } finally {
    await Promise.all(workers.map((w) => w.close()));
    await client.close();
    await admin.del('flow', delayedKeysOf('flow', false).schedule, delayedKeysOf('flow', false).entries);
  }
}

async function promotionCost(o: { log: Log }, admin: Redis, waiting: number, sizes: ReturnType<typeof flowSizes>) {
  const stream = `flow-cost-${waiting}`;
  const keys = delayedKeysOf(stream, false);
  const delayed = new DelayedCommands(admin, false);
  const now = await redisNow(admin);
  const fields = (i: number) => JSON.stringify(['data', JSON.stringify({ order: i, customer: `customer-${i % 1000}`, total: 42.5 })]);
  const memoryBefore = usedMemory(await admin.info('memory'));
  o.log(`flow: filling a schedule with ${waiting.toLocaleString('en-US')} waiting entries`);
  for (let from = 0; from < waiting; from += 10_000) {
    const pipe = admin.pipeline();
    for (let i = from; i < Math.min(waiting, from + 10_000); i++) {
      pipe.hset(keys.entries, `id-${i}`, fields(i));
      pipe.zadd(keys.schedule, now + 86_400_000 + i, `id-${i}`);
    }
    await pipe.exec();
  }
  const bytesPerWaiting = (usedMemory(await admin.info('memory')) - memoryBefore) / waiting;
  // What the entry itself is: its id and its fields' JSON; the rest is the schedule's own cost.
  const valueBytes = Buffer.byteLength(fields(waiting >> 1)) + Buffer.byteLength(`id-${waiting >> 1}`);
  // A look that moves nothing, `idleLooks` times.
  await admin.config('RESETSTAT');
  for (let i = 0; i < sizes.idleLooks; i++) await delayed.promote([stream], PROMOTE_BATCH);
  const idleLookUs = evalshaUsecPerCall(await admin.info('commandstats'));
  // `dueOnTop` entries due now, moved in.
  const pipe = admin.pipeline();
  for (let i = 0; i < sizes.dueOnTop; i++) {
    pipe.hset(keys.entries, `due-${i}`, fields(i));
    pipe.zadd(keys.schedule, now - 1, `due-${i}`);
  }
  await pipe.exec();
  await admin.config('RESETSTAT');
  let moved = 0;
  for (;;) {
    const [p] = await delayed.promote([stream], PROMOTE_BATCH);
    moved += p!.moved;
    if (p!.more === undefined) break;
  }
  const stats = parseEvalsha(await admin.info('commandstats'));
  await admin.del(stream, keys.schedule, keys.entries);
  return { waiting, idleLookUs, movedUsPerEntry: stats.usec / Math.max(1, moved), bytesPerWaiting, valueBytes };
}

/** A backlog of `entries` (XADDs in MULTI … EXEC batches), the group at 0, for `stream`. */
async function backlog(admin: Redis, stream: string, entries: number, keys = 0): Promise<void> {
  await admin.del(stream);
  await admin.xgroup('CREATE', stream, 'bench', '0', 'MKSTREAM');
  for (let from = 0; from < entries; from += 5_000) {
    const tx = admin.multi();
    for (let i = from; i < Math.min(entries, from + 5_000); i++)
      tx.xadd(stream, '*', 'data', JSON.stringify({ i }), ...(keys > 0 ? ['partitionKey', `k${i % keys}`] : []));
    await tx.exec();
  }
}

/** `workers` StreamConsumers under one limit on a backlog larger than it lets through: entries started per second over `rateRunMs`. */
async function rateAccuracy(o: { url: string; log: Log }, admin: Redis, workers: number, sizes: ReturnType<typeof flowSizes>) {
  const stream = `flow-rate-${workers}`;
  const seconds = sizes.rateRunMs / 1000;
  await backlog(admin, stream, Math.ceil(sizes.rateMax * seconds * 1.5));
  await admin.del(`${stream}:rate:bench`, `${stream}:ratelimited:bench`);
  o.log(`flow: rate limit ${sizes.rateMax}/s, ${workers} worker(s), ${seconds} s`);
  const starts: number[] = [];
  const consumers = Array.from({ length: workers }, (_, w) =>
    new StreamConsumer({ connection: o.url, group: 'bench', consumer: `r${w}`, logger: false, concurrency: 16, blockMs: 1000 }).handle(
      stream,
      () => void starts.push(performance.now()),
      { rateLimit: { max: sizes.rateMax, perMs: 1000 } },
    ),
  );
  await Promise.all(consumers.map((c) => c.start()));
  // From the first start: what a steady run lets through (the first window's burst is the limit's, counted in).
  await waitFor(() => starts.length > 0, { message: 'a first entry', timeoutMs: 10_000 });
  const from = starts[0]!;
  await new Promise((resolve) => setTimeout(resolve, sizes.rateRunMs)); // the measured period, not a wait for a condition
  await Promise.all(consumers.map((c) => c.close()));
  const measured = starts.filter((t) => t - from < sizes.rateRunMs).length / seconds;
  await admin.del(stream, `${stream}:rate:bench`);
  return { workers, limitPerSec: sizes.rateMax, measuredPerSec: measured, seconds };
}

/** The same per key: 4 keys, each limited to a quarter of `rateMax` (`perKey: true`): each key's entries started per second. */
async function keyRateAccuracy(o: { url: string; log: Log }, admin: Redis, workers: number, sizes: ReturnType<typeof flowSizes>) {
  const stream = `flow-key-rate-${workers}`;
  const keys = 4;
  const perKey = sizes.rateMax / keys;
  const seconds = sizes.rateRunMs / 1000;
  await backlog(admin, stream, Math.ceil(sizes.rateMax * seconds * 1.5), keys);
  const windows = async () => (await admin.keys(`${stream}:rate*`)).concat(await admin.keys(`${stream}:ratelimited*`));
  const stale = await windows();
  if (stale.length > 0) await admin.del(...stale);
  o.log(`flow: rate limit ${perKey}/s per key (${keys} keys), ${workers} worker(s), ${seconds} s`);
  const starts: { key: string; at: number }[] = [];
  const consumers = Array.from({ length: workers }, (_, w) =>
    new StreamConsumer({ connection: o.url, group: 'bench', consumer: `k${w}`, logger: false, concurrency: 16, blockMs: 1000 }).handle(
      stream,
      (_: unknown, ctx: { getFields(): Record<string, string> }) =>
        void starts.push({ key: ctx.getFields().partitionKey!, at: performance.now() }),
      { rateLimit: { max: perKey, perMs: 1000, perKey: true } },
    ),
  );
  const scriptsBefore = parseEvalsha(await admin.info('commandstats')).calls;
  await Promise.all(consumers.map((c) => c.start()));
  await waitFor(() => starts.length > 0, { message: 'a first entry', timeoutMs: 10_000 });
  const from = starts[0]!.at;
  await new Promise((resolve) => setTimeout(resolve, sizes.rateRunMs)); // the measured period, not a wait for a condition
  await Promise.all(consumers.map((c) => c.close()));
  const scriptsPerStart = (parseEvalsha(await admin.info('commandstats')).calls - scriptsBefore) / starts.length;
  const perSec = Array.from(
    { length: keys },
    (_, k) => starts.filter((s) => s.key === `k${k}` && s.at - from < sizes.rateRunMs).length / seconds,
  );
  const left = await windows();
  await admin.del(stream, ...left);
  return {
    workers,
    limitPerSec: perKey,
    keys,
    slowestPerSec: Math.min(...perSec),
    fastestPerSec: Math.max(...perSec),
    seconds,
    scriptsPerStart,
  };
}

/** One worker (concurrency 16, no-op handler) drains `entries`, with a limit far above its rate or none: msgs/s. */
async function drain(o: { url: string; log: Log }, admin: Redis, entries: number, limited: boolean): Promise<number> {
  const stream = 'flow-drain';
  await backlog(admin, stream, entries);
  await admin.del(`${stream}:rate:bench`);
  let handled = 0;
  let first = 0;
  let last = 0;
  const c = new StreamConsumer({ connection: o.url, group: 'bench', consumer: 'd', logger: false, concurrency: 16, batchSize: 100 }).handle(
    stream,
    () => {
      last = performance.now();
      if (handled++ === 0) first = last;
    },
    limited ? { rateLimit: { max: 100_000, perMs: 1000 } } : {},
  );
  await c.start();
  await waitFor(() => handled >= entries, { message: `${entries} drained`, timeoutMs: 120_000, intervalMs: 50 });
  await c.close();
  await admin.del(stream, `${stream}:rate:bench`);
  o.log(
    `flow: drain ${limited ? 'with a limit above its rate' : 'without a limit'}: ${Math.round(entries / ((last - first) / 1000))} msgs/s`,
  );
  return entries / ((last - first) / 1000);
}

const usedMemory = (info: string) => Number(/used_memory:(\d+)/.exec(info)![1]);

function parseEvalsha(info: string): { calls: number; usec: number } {
  const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(info);
  return m ? { calls: Number(m[1]), usec: Number(m[2]) } : { calls: 0, usec: NaN };
}

const evalshaUsecPerCall = (info: string) => {
  const s = parseEvalsha(info);
  return s.usec / Math.max(1, s.calls);
};

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export function flowMarkdown(s: FlowSection, smokeNote: string): string {
  const f = (v: number, d = 0) =>
    Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '—';
  const row = (what: string, d: Distribution) =>
    `| ${what} | ${f(d.count)} | ${f(d.p50, 1)} | ${f(d.p99, 1)} | ${f(d.max, 1)} | ${f(d.min, 1)} |`;
  const l = s.lateness;
  const [small, large] = [s.cost[0]!, s.cost[s.cost.length - 1]!];
  return [
    `## Flow control: delayed delivery and rate limits${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `Two StreamConsumers with the default options (flowCheckMs 1000, blockMs 5000), one redis-server, this host. ${f(s.sizes.entries)} entries scheduled up front, due evenly over ${f(s.sizes.spreadMs / 1000)} s; meanwhile, every ${s.sizes.everyMs} ms, a plain entry and one delayed 100–500 ms (due sooner than any entry the workers knew of at their last look). Lateness in ms after the due time; the plain entries' XADD → handler latency is the reference of the same run.`,
    '',
    '| what | entries | p50 ms | p99 ms | max ms | min ms |',
    '| --- | ---: | ---: | ---: | ---: | ---: |',
    row('scheduled up front: visible in the stream (stream id − due, Redis clock)', l.promoted),
    row('scheduled up front: in the handler', l.handled),
    row('scheduled all along with short delays, beside those: in the handler', l.lateScheduled),
    row('scheduled alone (100 ms, nothing else waiting: found at the next look): in the handler', l.alone),
    row('reference: plain entry, XADD → handler', l.plain),
    '',
    `Against the plain entry's delivery latency (the reference), a delayed entry known at a worker's look is ${f(l.handled.p50 / l.plain.p50, 2)}× at p50 and ${f(l.handled.p99 / l.plain.p99, 2)}× at p99; one scheduled alone waits for the next look (p50 ${f(l.alone.p50, 0)} ms, max ${f(l.alone.max, 0)} ms, flowCheckMs 1000). Early: the stream row is on Redis' clock alone and a negative "min" there would be an early delivery (the run lists it as a problem); the handler rows read this host's clock against Redis' (offset measured to a few µs over loopback), so a handler may start up to ~0.1 ms "before" its due time by that reading.`,
    '',
    '| entries waiting | Redis µs per look that moves nothing | Redis µs per entry moved | bytes per waiting entry | of which the entry (id and fields) | schedule overhead per entry |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    ...s.cost.map(
      (c) =>
        `| ${f(c.waiting)} | ${f(c.idleLookUs, 1)} | ${f(c.movedUsPerEntry, 1)} | ${f(c.bytesPerWaiting)} | ${f(c.valueBytes)} | ${f(c.bytesPerWaiting - c.valueBytes)} |`,
    ),
    '',
    `${f(large.waiting)} waiting against ${f(small.waiting)}: a look that moves nothing ${f(large.idleLookUs / small.idleLookUs, 2)}×, an entry moved ${f(large.movedUsPerEntry / small.movedUsPerEntry, 2)}× (a look costs log n in what waits, not n).`,
    '',
    '### Rate limits',
    '',
    `A backlog larger than the limit lets through, drained by 1 and 4 StreamConsumers (concurrency 16, no-op handler) of one group under \`rateLimit: { max: ${s.sizes.rateMax}, perMs: 1000 }\`: entries started per second from the first start, over ${f(s.sizes.rateRunMs / 1000)} s (the first window's burst included).`,
    '',
    '| workers | limit /s | started /s | started / limit |',
    '| ---: | ---: | ---: | ---: |',
    ...s.rates.map(
      (r) => `| ${r.workers} | ${f(r.limitPerSec)} | ${f(r.measuredPerSec, 1)} | **${f(r.measuredPerSec / r.limitPerSec, 3)}×** |`,
    ),
    '',
    `Per key: the same backlog spread over ${s.keyRates[0]?.keys ?? 4} keys (\`partitionKey\`), each limited to a quarter (\`rateLimit: { max: ${f(s.keyRates[0]?.limitPerSec ?? NaN)}, perMs: 1000, perKey: true }\`): each key's entries started per second, the slowest and the fastest key.`,
    '',
    '| workers | limit /s per key | slowest key /s | fastest key /s | fastest / limit | scripts per start |',
    '| ---: | ---: | ---: | ---: | ---: | ---: |',
    ...s.keyRates.map(
      (r) =>
        `| ${r.workers} | ${f(r.limitPerSec)} | ${f(r.slowestPerSec, 1)} | ${f(r.fastestPerSec, 1)} | **${f(r.fastestPerSec / r.limitPerSec, 3)}×** | ${f(r.scriptsPerStart, 1)} |`,
    ),
    '',
    'Scripts per start: the scripts (EVALSHA) Redis ran during the run per entry started: a grant try for each start, and for each refusal a grant try and a retry record. Each worker brings its own waiting entries back, so refusals grow with workers × max per window, not with the backlog.',
    '',
    `Overhead: one worker drains ${f(s.sizes.overheadEntries)} entries (concurrency 16, batch 100, no-op) with a limit far above its rate (100,000/s) against none, the two taking turns: ${f(median(s.overhead.limited))} against ${f(median(s.overhead.unlimited))} msgs/s, **${f(median(s.overhead.limited) / median(s.overhead.unlimited), 2)}×** (runs: ${s.overhead.limited.map((v) => f(v)).join(', ')}; ${s.overhead.unlimited.map((v) => f(v)).join(', ')}).`,
    ...(s.problems.length > 0 ? ['', `Problems: ${s.problems.join('; ')}`] : []),
  ].join('\n');
}
