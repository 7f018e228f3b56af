import { spawn, type ChildProcess } from 'node:child_process';
// The chaos schedule and the quiesce poll (with its deadline) are timed on purpose.
import { setTimeout as sleepMs } from 'node:timers/promises';
import { Cluster, Redis } from 'ioredis';
import { seededRandom } from '../../apps/orders-worker/src/worker-config.js';
import { decodeDeadLetter } from '../../libs/redis-streams/src/codec/dead-letter-codec.js';
import { groupFigures, LAG_COUNT_LIMIT } from '../../libs/redis-streams/src/redis/tools/group-lag.js';
import { parseGroupInfo } from '../../libs/redis-streams/src/redis/replies/info-replies.js';
import { requireBuilt, repoRoot } from '../support/built.js';
import { waitFor } from '../support/wait-for.js';

export interface ChaosOptions {
  redisUrl?: string;
  /** Run on a Redis Cluster instead: its node URLs (the workers get REDIS_CLUSTER_URLS). */
  clusterUrls?: string[];
  /** Entries the producer appends. */
  entries: number;
  seed: number;
  workers?: number;
  /** Longest wait for the group to drain once the chaos stopped. */
  maxQuiesceMs?: number;
  /** Longest the kill-and-restart phase lasts. */
  maxChaosMs?: number;
  /** Most kills and stops of the chaos (default 40), whatever the machine's speed. */
  maxFaults?: number;
  log?: (line: string) => void;
}

export interface ChaosResult {
  produced: number;
  handled: number;
  duplicates: number;
  deadLettered: number;
  /** Produced ids neither handled nor dead-lettered. */
  lost: string[];
  pending: number;
  lag: number;
  kills: number;
  terms: number;
  restartsUnderNewName: number;
  /** From the end of the chaos to lag 0 and nothing pending. */
  quiesceMs: number;
  /** Exit codes of the final SIGTERM of every worker. */
  finalExitCodes: (number | null)[];
}

interface Slot {
  base: string;
  name: string;
  generation: number;
  proc: ChildProcess;
  exit: Promise<number | null>;
}

const GROUP = 'chaos';

/**
 * Three demo workers in one group, a producer appending `entries` orders, and a driver that
 * SIGKILLs (and sometimes SIGTERMs) a random worker every 300–700 ms and restarts it under
 * the same or a new name. Deterministic for a seed (chaos schedule and handler failures),
 * bounded in time, and every child is killed on the way out, even on failure.
 */
export async function runChaos(o: ChaosOptions): Promise<ChaosResult> {
  const log = o.log ?? (() => {});
  const random = seededRandom(o.seed);
  const prefix = `chaos-${o.seed}-${Date.now()}:`;
  const stream = `${prefix}orders`;
  const recordKey = `${prefix}handled`;
  const main = requireBuilt('dist/apps/orders-worker/main.js');
  const admin: Redis = o.clusterUrls
    ? (new Cluster(o.clusterUrls.map((u) => ({ host: '127.0.0.1', port: Number(new URL(u).port) }))) as unknown as Redis)
    : new Redis(o.redisUrl!);
  // On a cluster the dead-letter stream shares the stream's slot: `{stream}:dead`.
  const deadStream = o.clusterUrls ? `{${stream}}:dead` : `${stream}:dead`;
  const slots: Slot[] = [];
  let generation = 0;

  const spawnWorker = (base: string, name: string): Slot => {
    const gen = ++generation;
    const proc = spawn(process.execPath, [main], {
      cwd: repoRoot,
      stdio: 'ignore',
      env: {
        ...process.env,
        ...(o.clusterUrls ? { REDIS_CLUSTER_URLS: o.clusterUrls.join(',') } : { REDIS_URL: o.redisUrl }),
        STREAMS_GROUP: GROUP,
        STREAMS_CONSUMER: name,
        STREAMS_KEY_PREFIX: prefix,
        STREAMS_BATCH: '10',
        STREAMS_BLOCK_MS: '100',
        STREAMS_MIN_IDLE_MS: '1000',
        STREAMS_MAX_DELIVERIES: '5',
        DEMO_WORK_JITTER_MS: '5',
        DEMO_FAIL_RATE: '0.02',
        DEMO_SEED: String(o.seed * 1000 + gen),
        DEMO_RECORD_KEY: recordKey,
        DEMO_QUIET: '1',
      },
    });
    const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
    return { base, name, generation: gen, proc, exit };
  };

  const counts = { kills: 0, terms: 0, restartsUnderNewName: 0 };
  try {
    await admin.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
    for (let i = 1; i <= (o.workers ?? 3); i++) slots.push(spawnWorker(`w${i}`, `w${i}`));

    // The producer: pipelined appends, at full speed, while the chaos goes on.
    const produced: string[] = [];
    const producing = (async () => {
      for (let start = 0; start < o.entries; start += 500) {
        const batch = admin.pipeline();
        for (let i = start; i < Math.min(o.entries, start + 500); i++) batch.xadd(stream, '*', 'order_id', String(i), 'status', 'chaos');
        for (const [err, id] of (await batch.exec()) ?? []) {
          if (err) throw err;
          produced.push(id as string);
        }
      }
    })();
    let producerDone = false;
    void producing.then(
      () => (producerDone = true),
      () => (producerDone = true),
    );

    // The chaos: until the producer is done and most entries were handled (kills then hit
    // workers in the middle of batches), at most maxFaults faults and maxChaosMs.
    const chaosStart = Date.now();
    const maxChaosMs = o.maxChaosMs ?? 60_000;
    const maxFaults = o.maxFaults ?? 40;
    const busy = async () => !producerDone || (await admin.hlen(recordKey)) < o.entries * 0.5;
    let handledAtFault = 0;
    while (counts.kills + counts.terms < maxFaults && (await busy()) && Date.now() - chaosStart < maxChaosMs) {
      // Each fault comes once handling has gone on since the last one (on a slow machine a fault every
      // 300–700 ms would otherwise only ever kill workers still starting); the victim is picked at random.
      await waitFor(async () => (await admin.hlen(recordKey)) > handledAtFault, {
        timeoutMs: 30_000,
        intervalMs: 50,
        message: `handling to go on after fault ${counts.kills + counts.terms}`,
      });
      await sleepMs(300 + Math.floor(random() * 400));
      handledAtFault = await admin.hlen(recordKey);
      const slot = slots[Math.floor(random() * slots.length)]!;
      const term = random() < 0.2;
      slot.proc.kill(term ? 'SIGTERM' : 'SIGKILL');
      counts[term ? 'terms' : 'kills']++;
      await Promise.race([slot.exit, sleepMs(10_000)]);
      if (slot.proc.exitCode === null && slot.proc.signalCode === null) slot.proc.kill('SIGKILL');
      await slot.exit;
      const renamed = random() < 0.5;
      if (renamed) counts.restartsUnderNewName++;
      slots[slots.indexOf(slot)] = spawnWorker(slot.base, renamed ? `${slot.base}-g${generation + 1}` : slot.name);
    }
    await producing;
    log(
      `chaos over after ${Date.now() - chaosStart} ms: ${counts.kills} SIGKILL, ${counts.terms} SIGTERM, ${counts.restartsUnderNewName} restarts under a new name`,
    );

    // Quiesce: every entry delivered (lag 0) and settled (nothing pending).
    const quiesceStart = Date.now();
    const quiesceLimitMs = o.maxQuiesceMs ?? 120_000;
    let progress = { lag: 0, pending: 0 };
    await waitFor(async () => ((progress = await groupProgress(admin, stream)), progress.lag + progress.pending === 0), {
      timeoutMs: quiesceLimitMs,
      intervalMs: 100,
      message: 'quiescence',
    }).catch(() => {
      throw new Error(`not quiescent after ${quiesceLimitMs} ms: lag ${progress.lag}, pending ${progress.pending}`);
    });
    const quiesceMs = Date.now() - quiesceStart;

    const finalExitCodes = await Promise.all(
      slots.map(async (slot) => {
        slot.proc.kill('SIGTERM');
        return Promise.race([slot.exit, sleepMs(15_000, -1)]);
      }),
    );

    const handledCounts = await admin.hgetall(recordKey);
    const dead = new Set((await admin.xrange(deadStream, '-', '+')).map(([id, f]) => decodeDeadLetter(id, f).sourceId));
    let handled = 0;
    let duplicates = 0;
    for (const count of Object.values(handledCounts)) {
      handled++;
      duplicates += Number(count) - 1;
    }
    const lost = produced.filter((id) => !handledCounts[id] && !dead.has(id));
    return {
      produced: produced.length,
      handled,
      duplicates,
      deadLettered: dead.size,
      lost,
      ...progress,
      ...counts,
      quiesceMs,
      finalExitCodes,
    };
  } finally {
    for (const slot of slots) if (slot.proc.exitCode === null && slot.proc.signalCode === null) slot.proc.kill('SIGKILL');
    await Promise.all(slots.map((s) => s.exit));
    admin.disconnect();
  }
}

async function groupProgress(admin: Redis, stream: string): Promise<{ lag: number; pending: number }> {
  // The transport's lag (group-lag.ts), not the server's: a promoted Redis 7.0 replica's can stay high forever.
  const info = parseGroupInfo(await admin.xinfo('GROUPS', stream), GROUP);
  if (!info) throw new Error(`group ${GROUP} is gone from ${stream}`);
  const { lag, pending } = await groupFigures(admin, stream, info);
  // Unknown: more than are counted are still to be delivered.
  return { lag: lag ?? LAG_COUNT_LIMIT + 1, pending };
}
