import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
// The chaos schedule and the producer's pace are timed on purpose (a fault every few hundred ms).
import { setTimeout as sleepMs } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { seededRandom } from '../../apps/orders-worker/src/worker-config.js';
import { decodeDeadLetter } from '../../libs/redis-streams/src/codec/dead-letter-codec.js';
import { groupFigures, LAG_COUNT_LIMIT } from '../../libs/redis-streams/src/redis/tools/group-lag.js';
import { parseGroupInfo } from '../../libs/redis-streams/src/redis/replies/info-replies.js';
import { repoRoot } from '../support/built.js';
import { waitFor } from '../support/wait-for.js';

/** What an operator's script does to a live group: kill -9 a worker (restarted under its name or a new one), `XGROUP DELCONSUMER` of a live worker, `XCLAIM … 0 … JUSTID` of a consumer's pending entries to another live worker. */
export type OperatorFault = 'kill' | 'delconsumer' | 'claim';

export interface OperatorChaosOptions {
  redisUrl: string;
  /** Entries the producer appends, paced over the first 80% of the chaos. */
  entries: number;
  /** How long the faults go on. */
  chaosMs: number;
  seed: number;
  /** The kinds of fault (all three by default). */
  faults?: readonly OperatorFault[];
  workers?: number;
  /** Every entry whose `n` is a multiple of this fails its first delivery. */
  failEvery?: number;
  /** The workers' `retry: fixed` delay. */
  delayMs?: number;
  minIdleMs?: number;
  leaseRenewMs?: number;
  /** Where the handlings' record and the workers' logs are written. */
  dir: string;
  /** Once the chaos is over: how long the counts may stand still before what is left is called stuck or lost. */
  stillMs?: number;
  log?: (line: string) => void;
}

export interface OperatorChaosResult {
  produced: number;
  /** Entries handled successfully at least once. */
  handled: number;
  /** Successful handlings past the first of an entry. */
  duplicates: number;
  /** Entries whose first delivery failed (every `failEvery`-th), and of them those handled successfully since. */
  failedOnce: number;
  retried: number;
  deadLettered: number;
  /** Neither handled successfully nor dead-lettered. */
  lost: string[];
  pending: number;
  lag: number;
  kills: number;
  renamed: number;
  delconsumers: number;
  /** Pending entries those deletes dropped from the PEL, as Redis counted them. */
  dropped: number;
  claims: number;
  claimedEntries: number;
  /** Everything the record, the faults and the workers' logs say of an entry, in time order. */
  trace: (id: string) => string[];
}

interface Slot {
  base: string;
  name: string;
  proc: ChildProcess;
  ready: boolean;
  exit: Promise<void>;
}

const GROUP = 'g';

/**
 * The accounting run of issue 48: worker processes (test/fixtures/accounting-worker.mjs) with a
 * `retry: fixed` delay, a producer whose every `failEvery`-th entry fails once, and an operator's
 * faults all at once, one every 150–450 ms (seeded): kill -9 with a restart under the same or a new
 * name, XGROUP DELCONSUMER of a live worker, XCLAIM … 0 … JUSTID of up to 10 of a consumer's pending
 * entries (a live worker's or a killed one's) to another live worker. Live: its loop has beaten since
 * it started (the fixture says `ready` then), so a restart under the same name has taken back what was
 * pending under its name; deleting the name before that drops the killed process's entries, as Redis does. Every handling is recorded
 * outside the processes; at the end every entry is classified (handled, dead-lettered, pending,
 * lost). Every child is killed on the way out, even on failure.
 */
export async function runOperatorChaos(o: OperatorChaosOptions): Promise<OperatorChaosResult> {
  const log = o.log ?? (() => {});
  const random = seededRandom(o.seed);
  const faults = o.faults ?? ['kill', 'delconsumer', 'claim'];
  const prefix = `opchaos-${o.seed}-${Date.now()}:`;
  const stream = `${prefix}orders`;
  const recordPath = `${o.dir}/handlings.log`;
  const settings = JSON.stringify({
    delayMs: o.delayMs ?? 1500,
    minIdleMs: o.minIdleMs ?? 1000,
    leaseRenewMs: o.leaseRenewMs ?? 250,
    failEvery: o.failEvery ?? 10,
  });
  const admin = new Redis(o.redisUrl);
  const slots: Slot[] = [];
  const events: string[] = [];
  const note = (what: string) => events.push(`${Date.now()} chaos ${what}`);
  let generation = 0;

  const spawnWorker = (base: string, name: string): Slot => {
    const proc = spawn(
      process.execPath,
      [
        `${repoRoot}test/fixtures/accounting-worker.mjs`,
        JSON.stringify(o.redisUrl),
        prefix,
        name,
        recordPath,
        `${o.dir}/${name}.${++generation}.log`,
        settings,
      ],
      { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const slot: Slot = { base, name, proc, ready: false, exit: new Promise((resolve) => proc.once('exit', () => resolve())) };
    let out = '';
    proc.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('ready\n')) slot.ready = true;
    });
    proc.stderr!.on('data', (d) => log(`${name}: ${String(d).trimEnd()}`));
    return slot;
  };
  const live = () => slots.filter((s) => s.ready && s.proc.exitCode === null && s.proc.signalCode === null);
  // When entries were last XCLAIMed to each consumer name. A consumer takes such an entry in at the second of its checks
  // (every leaseRenewMs / 2) that finds it; a DELCONSUMER before then drops an entry nobody knew, as the docs say
  // (failure-semantics.md: "a delete of it before then loses those that wait for no retry"). The operator here leaves
  // that window alone: two lease periods, twice the bound (CI saw an XCLAIM to w2 and its DELCONSUMER 219 ms apart).
  const claimedTo = new Map<string, number>();
  const takeInMs = 2 * (o.leaseRenewMs ?? 250);
  // When each consumer name was last deleted. A live worker takes back what the delete dropped at its next lease
  // renewal or audit; killed before then, what it held was known to it alone and is lost (failure-semantics.md, the
  // DELCONSUMER row). The operator leaves that window alone too: four lease periods (CI, on a saturated machine, saw a
  // kill 439 ms after the delete lose the 10 entries the worker held).
  const deletedAt = new Map<string, number>();
  const takeBackMs = 4 * (o.leaseRenewMs ?? 250);

  const counts = { kills: 0, renamed: 0, delconsumers: 0, dropped: 0, claims: 0, claimedEntries: 0 };
  const produced: string[] = [];
  try {
    await admin.xgroup('CREATE', stream, GROUP, '0', 'MKSTREAM');
    for (let i = 1; i <= (o.workers ?? 3); i++) slots.push(spawnWorker(`w${i}`, `w${i}`));
    await waitFor(() => live().length === slots.length, { message: 'the workers to start', timeoutMs: 30_000 });

    // The producer: `entries` over the first 80% of the chaos, a pipeline every 100 ms.
    const producing = (async () => {
      const rounds = Math.max(1, Math.floor((o.chaosMs * 0.8) / 100));
      const per = Math.ceil(o.entries / rounds);
      for (let n = 0; n < o.entries;) {
        const batch = admin.pipeline();
        for (const end = Math.min(o.entries, n + per); n < end; n++) batch.xadd(stream, '*', 'n', String(n));
        for (const [err, id] of (await batch.exec()) ?? []) {
          if (err) throw err;
          produced.push(id as string);
        }
        await sleepMs(100);
      }
    })();

    const chaosEnd = Date.now() + o.chaosMs;
    // Each kind in every round, in a random order (drawn independently, one could be drawn too rarely, or only when it
    // found nothing to act on: CI saw a run without a claim); past chaosEnd, a kind that never acted is tried a while more.
    let round: OperatorFault[] = [];
    const acted = () => ({ kill: counts.kills, delconsumer: counts.delconsumers, claim: counts.claims });
    const missing = () => faults.filter((f) => acted()[f] === 0);
    while (Date.now() < chaosEnd || (missing().length > 0 && Date.now() < chaosEnd + o.chaosMs)) {
      await sleepMs(150 + Math.floor(random() * 300));
      if (round.length === 0) round = Date.now() < chaosEnd ? [...faults].sort(() => random() - 0.5) : missing();
      const fault = round.shift()!;
      const up = live();
      if (up.length === 0) continue;
      const slot = up[Math.floor(random() * up.length)]!;
      if (fault === 'kill') {
        if (Date.now() - (deletedAt.get(slot.name) ?? -Infinity) < takeBackMs) {
          round.unshift(fault);
          continue;
        }
        slot.proc.kill('SIGKILL');
        await slot.exit;
        const renamed = random() < 0.5;
        const name = renamed ? `${slot.base}-g${generation + 1}` : slot.name;
        note(`kill -9 ${slot.name}, restarted as ${name}`);
        counts.kills++;
        if (renamed) counts.renamed++;
        slots[slots.indexOf(slot)] = spawnWorker(slot.base, name);
      } else if (fault === 'delconsumer') {
        if (Date.now() - (claimedTo.get(slot.name) ?? -Infinity) < takeInMs) {
          round.unshift(fault);
          continue;
        }
        const dropped = Number(await admin.xgroup('DELCONSUMER', stream, GROUP, slot.name));
        deletedAt.set(slot.name, Date.now());
        note(`XGROUP DELCONSUMER ${slot.name} (${dropped} pending dropped)`);
        counts.delconsumers++;
        counts.dropped += dropped;
      } else {
        // From any consumer with pending entries (a killed one's too) to a live worker that is not it.
        const [, , , owners] = (await admin.xpending(stream, GROUP)) as [number, string, string, [string, string][] | null];
        const from = (owners ?? []).filter(([name]) => name !== slot.name);
        if (from.length === 0) continue;
        const [source] = from[Math.floor(random() * from.length)]!;
        const ids = ((await admin.xpending(stream, GROUP, '-', '+', 10, source)) as [string][]).map(([id]) => id);
        if (ids.length === 0) continue;
        const moved = (await admin.xclaim(stream, GROUP, slot.name, 0, ...ids, 'JUSTID')) as string[];
        note(`XCLAIM ${source} → ${slot.name} JUSTID ${moved.join(' ')}`);
        claimedTo.set(slot.name, Date.now());
        counts.claims++;
        counts.claimedEntries += moved.length;
      }
    }
    await producing;
    log(
      `operator chaos over: ${counts.kills} kill -9 (${counts.renamed} restarted under a new name), ${counts.delconsumers} DELCONSUMER (${counts.dropped} pending dropped), ${counts.claims} XCLAIM by hand (${counts.claimedEntries} entries)`,
    );

    // Settled: every entry handled or dead-lettered, nothing pending; or the counts stand still for stillMs.
    const deadStream = `${stream}:dead`;
    let state = await tally();
    await waitFor(
      async () => {
        state = await tally();
        return state.missing === 0 && state.pending === 0 && state.lag === 0;
      },
      { timeoutMs: o.stillMs ?? 15_000, intervalMs: 200, message: 'every entry handled or dead-lettered', progress: () => state.key },
    ).catch(() => undefined);

    async function tally() {
      const record = readRecord(recordPath);
      const dead = new Set((await admin.xrange(deadStream, '-', '+')).map(([id, f]) => decodeDeadLetter(id, f).sourceId));
      const info = parseGroupInfo(await admin.xinfo('GROUPS', stream), GROUP);
      if (!info) throw new Error(`group ${GROUP} is gone from ${stream}`);
      const figures = await groupFigures(admin, stream, info);
      const lag = figures.lag ?? LAG_COUNT_LIMIT + 1;
      const missing = produced.filter((id) => !record.ok.has(id) && !dead.has(id)).length;
      return { record, dead, pending: figures.pending, lag, missing, key: `${record.lines}/${dead.size}/${figures.pending}/${lag}` };
    }

    const { record, dead } = state;
    const lost = produced.filter((id) => !record.ok.has(id) && !dead.has(id));
    let duplicates = 0;
    for (const n of record.ok.values()) duplicates += n - 1;
    const logs = readLogs(o.dir);
    return {
      produced: produced.length,
      handled: record.ok.size,
      duplicates,
      failedOnce: record.failed.size,
      retried: [...record.failed].filter((id) => record.ok.has(id)).length,
      deadLettered: dead.size,
      lost,
      pending: state.pending,
      lag: state.lag,
      ...counts,
      trace: (id) =>
        [
          ...record.linesOf(id),
          ...events.filter((e) => e.includes(id) || e.includes('DELCONSUMER') || e.includes('kill')),
          ...logs.filter((l) => l.includes(id)),
        ]
          .map((l) => l.trim())
          .sort(),
    };
  } finally {
    for (const slot of slots) slot.proc.kill('SIGKILL');
    await Promise.all(slots.map((s) => s.exit));
    admin.disconnect();
  }
}

/** The handlings' record (`<ms> ok|fail <id> <deliveryCount> <consumer>`): successful handlings per entry, the entries whose first try failed, each entry's lines. */
function readRecord(path: string) {
  const ok = new Map<string, number>();
  const failed = new Set<string>();
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // Nothing handled yet.
  }
  const lines = text.split('\n').filter(Boolean);
  for (const line of lines) {
    const [, what, id] = line.split(' ');
    if (what === 'ok') ok.set(id!, (ok.get(id!) ?? 0) + 1);
    else if (what === 'fail') failed.add(id!);
  }
  return {
    ok,
    failed,
    lines: lines.length,
    linesOf: (id: string) => lines.filter((l) => l.includes(id)).map((l) => l.replace(' ', ' record ')),
  };
}

/** The workers' log lines, each `<ms> <consumer> <level> <message>`. */
function readLogs(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.log') && f !== 'handlings.log')
    .flatMap((f) => readFileSync(`${dir}/${f}`, 'utf8').split('\n').filter(Boolean));
}
