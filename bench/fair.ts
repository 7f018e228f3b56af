// The fair-groups section of `npm run bench` (`--only fair` alone): what `fair: { inHand }` costs the drain, against
// the same pattern unordered and ordered. The ordered section's harness (bench/ordered.ts, its workers
// bench/ordered-child.ts): one logical stream of 4 partitions, a backlog of entries whose `partitionKey` is one of
// 1,000 keys, the workers up first (warm), the drain timed from the first entry handled to the last one acked; a
// 1 ms handler, 1 and 4 worker processes, concurrency 16. The variants take turns (the order rotates) and the figure
// is the ratio of their medians in this run; nothing asserts a time. `fair` is `inHand: 1` (one entry of a key in
// hand, group-wide, as ordered has) and `fair-4` `inHand: 4`: a reader per partition at concurrency 16, as ordered
// has; `fair-c4` at 4 a reader, 16 a worker as unordered's one reader. The priorities rows (at 4 a reader too): `priorities: { levels: 3 }`, the
// backlog on level 0 (`priorities`: what the levels cost a pattern whose records carry none) or spread over the
// three levels (`priorities-spread`).
import { cpus, loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { measure, Worker, type OrderedCase, type OrderedMeasurement } from './ordered.js';

type Log = (line: string) => void;

export const FAIR_VARIANTS = ['unordered', 'ordered', 'fair', 'fair-c4', 'fair-4', 'priorities', 'priorities-spread'] as const;
export type FairVariant = (typeof FAIR_VARIANTS)[number];

export const fairSizes = (smoke: boolean) => ({
  entries: smoke ? 300 : 20_000,
  keys: 1_000,
  handlerMs: 1,
  workers: [1, 4],
  rounds: smoke ? 1 : 2,
  warmUp: smoke ? 0 : 5_000,
});

export interface FairCase {
  workers: number;
  runs: Partial<Record<FairVariant, OrderedMeasurement[]>>;
}

export interface FairSection {
  smoke: boolean;
  sizes: ReturnType<typeof fairSizes>;
  machine: { cores: number; loadAtStart: number; loadAtEnd: number };
  cases: FairCase[];
  problems: string[];
}

const extraOf = (variant: FairVariant) =>
  ({
    unordered: {},
    ordered: {},
    fair: { ordered: false, fairInHand: 1 },
    // A reader per partition at 4: 16 handlers a worker, as unordered's one reader of the four partitions.
    'fair-c4': { ordered: false, fairInHand: 1, concurrency: 4 },
    'fair-4': { ordered: false, fairInHand: 4 },
    priorities: { ordered: false, priorityLevels: 3, concurrency: 4 },
    'priorities-spread': { ordered: false, priorityLevels: 3, spreadLevels: true, concurrency: 4 },
  })[variant];
const baseOf = (variant: FairVariant) => (variant === 'ordered' ? 'ordered' : 'unordered');

export async function benchFair(o: { smoke: boolean; url: string; log: Log }): Promise<FairSection> {
  const sizes = fairSizes(o.smoke);
  const section: FairSection = {
    smoke: o.smoke,
    sizes,
    machine: { cores: cpus().length, loadAtStart: loadavg()[0]!, loadAtEnd: NaN },
    cases: [],
    problems: [],
  };
  const admin = new Redis(o.url);
  const workers: Worker[] = [];
  const killAll = () => workers.forEach((w) => w.proc.kill('SIGKILL'));
  process.on('exit', killAll);
  try {
    const most = Math.max(...sizes.workers);
    workers.push(...(await Promise.all(Array.from({ length: most }, (_, i) => Worker.spawn({ url: o.url, consumer: `w${i}` })))));
    const caseOf = (n: number, entries: number): OrderedCase => ({
      keys: sizes.keys,
      workers: n,
      handlerMs: sizes.handlerMs,
      start: 'warm',
      entries,
      runs: {},
    });
    if (sizes.warmUp > 0) {
      o.log(`fair: warm-up (${sizes.warmUp} entries, ${most} workers, each variant once; not recorded)`);
      for (const variant of FAIR_VARIANTS) await measure(admin, workers, caseOf(most, sizes.warmUp), baseOf(variant), extraOf(variant));
    }
    let turn = 0;
    for (const n of sizes.workers) {
      const c: FairCase = { workers: n, runs: {} };
      section.cases.push(c);
      for (let round = 0; round < sizes.rounds; round++) {
        const order = FAIR_VARIANTS.map((_, i) => FAIR_VARIANTS[(i + turn) % FAIR_VARIANTS.length]!);
        turn++;
        for (const variant of order) {
          const m = await measure(admin, workers.slice(0, n), caseOf(n, sizes.entries), baseOf(variant), extraOf(variant));
          (c.runs[variant] ??= []).push(m);
          o.log(
            `fair: ${n} worker(s), ${variant}: ${Math.round(m.msgsPerSec)} msgs/s, ${m.cpuUsPerEntry.toFixed(1)} µs worker CPU/entry, ${m.redisCallsPerEntry.toFixed(2)} Redis calls/entry (${m.topCommands})`,
          );
          if (m.handled < sizes.entries) section.problems.push(`fair ${n} worker(s) ${variant}: handled ${m.handled} of ${sizes.entries}`);
          if ((variant === 'ordered' || variant === 'fair') && m.overlaps > 0)
            section.problems.push(`fair ${n} worker(s) ${variant}: ${m.overlaps} overlapping run(s) of one key in a worker`);
        }
      }
    }
  } catch (err) {
    section.problems.push(String(err));
  } finally {
    section.machine.loadAtEnd = loadavg()[0]!;
    await Promise.all(workers.map((w) => w.exit()));
    process.off('exit', killAll);
    admin.disconnect();
  }
  return section;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export function fairMarkdown(s: FairSection, smokeNote: string): string {
  const f = (v: number, d = 0) =>
    Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '—';
  const med = (c: FairCase, v: FairVariant, pick: (m: OrderedMeasurement) => number) => median((c.runs[v] ?? []).map(pick));
  return [
    `## Fair groups and priorities: the drain against unordered and ordered${s.smoke ? `\n\n${smokeNote}` : ''}`,
    '',
    `One logical stream of 4 partitions, ${f(s.sizes.entries)} entries over ${f(s.sizes.keys)} keys (\`partitionKey\`), a ${s.sizes.handlerMs} ms handler, concurrency 16 and batchSize 100 per worker, StreamConsumers in processes of their own (bench/ordered-child.ts), the workers up before the backlog appears. \`fair\` is \`fair: { inHand: 1 }\` (at most one entry of a key in hand, by the whole group: a slot per entry in Redis), \`fair-4\` \`inHand: 4\`. Medians of ${s.sizes.rounds} runs per variant, the variants taking turns; ratios are against the same run's unordered and ordered. Machine: ${s.machine.cores} cores, load ${f(s.machine.loadAtStart, 1)} → ${f(s.machine.loadAtEnd, 1)}.`,
    '',
    'Two pairs of equals: `fair` against `ordered` (a reader per partition at concurrency 16 each: one entry of a key in hand, the one in order and fenced, the other round-robin with a slot per entry), and `fair-c4` against `unordered` (16 handlers a worker: unordered has one reader for its four partitions, fair one per partition at 4).',
    '',
    '| workers | unordered msgs/s | ordered msgs/s | fair msgs/s | fair-c4 msgs/s | fair-4 msgs/s | fair / ordered | fair-c4 / unordered | fair-4 / ordered | worker CPU µs/entry (unordered, ordered, fair) | Redis calls/entry (unordered, ordered, fair) |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...s.cases.map((c) => {
      const rate = (v: FairVariant) => med(c, v, (m) => m.msgsPerSec);
      const cpu = (v: FairVariant) =>
        f(
          med(c, v, (m) => m.cpuUsPerEntry),
          1,
        );
      const calls = (v: FairVariant) =>
        f(
          med(c, v, (m) => m.redisCallsPerEntry),
          2,
        );
      return `| ${c.workers} | ${f(rate('unordered'))} | ${f(rate('ordered'))} | ${f(rate('fair'))} | ${f(rate('fair-c4'))} | ${f(rate('fair-4'))} | **${f(rate('fair') / rate('ordered'), 2)}×** | **${f(rate('fair-c4') / rate('unordered'), 2)}×** | ${f(rate('fair-4') / rate('ordered'), 2)}× | ${cpu('unordered')}, ${cpu('ordered')}, ${cpu('fair')} | ${calls('unordered')}, ${calls('ordered')}, ${calls('fair')} |`;
    }),
    '',
    '### Priorities: what the levels cost',
    '',
    `The same backlog, harness and handler; the pattern with \`priorities: { levels: 3 }\`: every record at level 0 (\`priorities\`: the cost of the levels to records that carry none: each park reads the three levels one after the other, highest first) or spread evenly over the three (\`priorities-spread\`). A pattern with priorities has a reader per partition (its levels), here at concurrency 4: 16 handlers a worker, as unordered's one reader of the four partitions.`,
    '',
    '| workers | unordered msgs/s | priorities msgs/s | priorities-spread msgs/s | priorities / unordered | priorities-spread / unordered | Redis calls/entry (unordered, priorities, spread) |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...s.cases.map((c) => {
      const rate = (v: FairVariant) => med(c, v, (m) => m.msgsPerSec);
      const calls = (v: FairVariant) =>
        f(
          med(c, v, (m) => m.redisCallsPerEntry),
          2,
        );
      return `| ${c.workers} | ${f(rate('unordered'))} | ${f(rate('priorities'))} | ${f(rate('priorities-spread'))} | **${f(rate('priorities') / rate('unordered'), 2)}×** | **${f(rate('priorities-spread') / rate('unordered'), 2)}×** | ${calls('unordered')}, ${calls('priorities')}, ${calls('priorities-spread')} |`;
    }),
    '',
    s.problems.length > 0
      ? `Problems: ${s.problems.join('; ')}`
      : 'Problems: none (every run handled every entry; no key ran twice at once in a worker under `fair`/`ordered`).',
  ].join('\n');
}
