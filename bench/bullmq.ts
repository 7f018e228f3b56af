// The drain against BullMQ at its concurrency settings: the same backlog, a no-op handler, BullMQ's Worker
// at concurrency 1, 8 and 32 and this transport at the same settings, taking turns round after round
// (medians). BullMQ pays round trips per job (move to active, move to completed), which concurrency
// overlaps; this transport reads and acks a batch per round trip. The fair figure is the best of each.
import type { SystemName } from './systems.js';

export interface BullmqRun {
  system: 'bullmq' | 'nestjs-redis-streams';
  concurrency: number;
  /** Median msgs/s over the rounds, and every round's. */
  msgsPerSec: number;
  runs: number[];
  cpuUsPerEntry: number;
}

export interface BullmqSection {
  n: number;
  rounds: number;
  batchSize: number;
  runs: BullmqRun[];
}

export const BULLMQ_CONCURRENCY = [1, 8, 32] as const;

interface Deps {
  smoke: boolean;
  batchSize: number;
  log: (line: string) => void;
  fresh: (what: string) => string;
  preload: (system: SystemName, key: string, n: number) => Promise<void>;
  cleanup: (system: SystemName, key: string) => Promise<void>;
  child: (args: Record<string, unknown>) => Promise<{ msgsPerSec: number; cpuUsPerEntry: number }>;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function benchBullmq(d: Deps): Promise<BullmqSection> {
  const n = d.smoke ? 200 : 20_000;
  const rounds = d.smoke ? 1 : 3;
  const cases = BULLMQ_CONCURRENCY.flatMap((c) =>
    (['bullmq', 'nestjs-redis-streams'] as const).map((system) => ({ system, concurrency: c })),
  );
  const results = new Map<string, { msgsPerSec: number; cpuUsPerEntry: number }[]>();
  for (let round = 0; round < rounds; round++) {
    // A different case first each round: a shared machine drifts.
    const order = [...cases.slice(round % cases.length), ...cases.slice(0, round % cases.length)];
    for (const { system, concurrency } of order) {
      const key = d.fresh('bullmq');
      await d.preload(system, key, n);
      const r = await d.child({ mode: 'drain', system, key, n, batchSize: d.batchSize, concurrency });
      const id = `${system} ${concurrency}`;
      results.set(id, [...(results.get(id) ?? []), r]);
      d.log(`  round ${round + 1} ${system} x${concurrency}: ${Math.round(r.msgsPerSec)} msgs/s`);
      await d.cleanup(system, key);
    }
  }
  return {
    n,
    rounds,
    batchSize: d.batchSize,
    runs: cases.map(({ system, concurrency }) => {
      const runs = results.get(`${system} ${concurrency}`)!;
      return {
        system,
        concurrency,
        msgsPerSec: median(runs.map((r) => r.msgsPerSec)),
        runs: runs.map((r) => Math.round(r.msgsPerSec)),
        cpuUsPerEntry: median(runs.map((r) => r.cpuUsPerEntry)),
      };
    }),
  };
}

const fmt = (x: number) => Math.round(x).toLocaleString('en-US');

/** The section's table: each concurrency's pair, and the ratio of the best of each. */
export function bullmqMarkdown(s: BullmqSection): string {
  const of = (system: BullmqRun['system'], c: number) => s.runs.find((r) => r.system === system && r.concurrency === c)!;
  const best = (system: BullmqRun['system']) => s.runs.filter((r) => r.system === system).sort((a, b) => b.msgsPerSec - a.msgsPerSec)[0]!;
  const ours = best('nestjs-redis-streams');
  const bull = best('bullmq');
  const lines = [
    `Drain of a ${fmt(s.n)}-entry backlog, no-op handler, batch ${s.batchSize}; medians of ${s.rounds} interleaved rounds (runs in brackets).`,
    '',
    '| concurrency | BullMQ Worker msgs/s | nestjs-redis-streams msgs/s | ratio |',
    '| ---: | ---: | ---: | ---: |',
    ...BULLMQ_CONCURRENCY.map((c) => {
      const b = of('bullmq', c);
      const o = of('nestjs-redis-streams', c);
      return `| ${c} | ${fmt(b.msgsPerSec)} (${b.runs.join(', ')}) | ${fmt(o.msgsPerSec)} (${o.runs.join(', ')}) | ${(o.msgsPerSec / b.msgsPerSec).toFixed(1)}× |`;
    }),
    '',
    `Best of each: BullMQ ${fmt(bull.msgsPerSec)} msgs/s (concurrency ${bull.concurrency}), nestjs-redis-streams ${fmt(ours.msgsPerSec)} msgs/s (concurrency ${ours.concurrency}): **${(ours.msgsPerSec / bull.msgsPerSec).toFixed(1)}×**.`,
  ];
  return lines.join('\n');
}
