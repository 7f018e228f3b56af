import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireBuilt } from './support/built.js';
import { startRedis, type TestRedis } from './support/redis-server.js';
import { runOperatorChaos, type OperatorFault } from './chaos/operator-chaos-run.js';

// Issue 48's accounting run: kill -9, XGROUP DELCONSUMER and XCLAIM by hand at once, under retries
// (REVIEW.md class 1). OPCHAOS_ENTRIES, OPCHAOS_MS, OPCHAOS_SEED and OPCHAOS_FAULTS (kill,delconsumer,claim)
// make a longer or narrower local run. CI runs 10 s of faults on each of two servers, a new seed each run (it printed
// 15 s until 2026-12-06: 36 CPU-s of CI's 2 cores for the two runs).
const entries = Number(process.env.OPCHAOS_ENTRIES ?? 1500);
const chaosMs = Number(process.env.OPCHAOS_MS ?? 10_000);
const seed = Number(process.env.OPCHAOS_SEED ?? Date.now() % 100_000);
const faults = (process.env.OPCHAOS_FAULTS?.split(',') ?? ['kill', 'delconsumer', 'claim']) as OperatorFault[];

let redis: TestRedis;
let dir: string;
beforeAll(async () => {
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'opchaos-'));
});
afterAll(async () => {
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('operator actions together: kill -9, XGROUP DELCONSUMER and XCLAIM by hand while entries wait for their retry', () => {
  it(
    `every entry handled or dead-lettered, nothing pending, none lost (${entries} entries, ${chaosMs} ms of faults, seed ${seed})`,
    {
      timeout: chaosMs + 120_000,
    },
    async () => {
      // The workers are StreamConsumers (the lighter start: a kill -9 restarts one every second or so).
      requireBuilt('libs/redis-streams/dist/esm/core/index.js');
      const lines: string[] = [];
      const r = await runOperatorChaos({
        redisUrl: redis.url,
        entries,
        chaosMs,
        seed,
        faults,
        dir,
        log: (l) => lines.push(l),
      });
      const summary =
        `operator chaos (seed ${seed}): ${r.produced} entries, ${r.handled} handled, ${r.failedOnce} failed once (${r.retried} of them handled since), ` +
        `${r.deadLettered} dead-lettered, ${r.duplicates} duplicate handlings, ${r.lost.length} lost, ${r.pending} pending, lag ${r.lag}; ` +
        `${r.kills} kill -9 (${r.renamed} renamed), ${r.delconsumers} DELCONSUMER (${r.dropped} pending dropped), ${r.claims} XCLAIM by hand (${r.claimedEntries} entries)`;
      console.log([...lines, summary].join('\n'));
      if (r.lost.length > 0)
        console.log(
          r.lost
            .slice(0, 3)
            .map((id) => [`lost ${id}:`, ...r.trace(id)].join('\n  '))
            .join('\n'),
        );
      expect(r.produced).toBe(entries);
      expect(r.lost).toEqual([]);
      expect(r.pending).toBe(0);
      expect(r.lag).toBe(0);
      const done = { kill: r.kills, delconsumer: r.delconsumers, claim: r.claims };
      for (const f of faults) expect(done[f], f).toBeGreaterThan(0);
    },
  );
});
