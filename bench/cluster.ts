// The Redis Cluster section of `npm run bench`: one logical stream drained from 1 partition or from 6
// (spread 2/2/2 over the 3 masters), by 1 or 3 consumer processes of nestjs-redis-streams, on a throwaway
// local cluster (3 masters + 3 replicas, scripts/local-cluster.mjs) started for this section only.
//
// All 6 redis-servers, the consumer processes and this one share the machine's cores, so on a small
// machine the measured 6 ÷ 1 ratio is the machine's ceiling, not the cluster's. Beside it, each master's
// own CPU time during the drain (INFO CPU deltas) gives what one master does per CPU-second, and from the
// busiest master the drain rate the cluster would reach with one core per master.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpus } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Cluster, Redis } from 'ioredis';
import { partitionKeys, RedisStreamsClient } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { parseInfo } from '../test/support/redis-info.js';
import { waitFor } from '../test/support/wait-for.js';

export interface ClusterRun {
  msgsPerSec: number;
  /** CPU of all consumer processes (user + system, from each one's first entry on), per entry. */
  consumerCpuUsPerEntry: number;
  /** Between the first and the last consumer process handling its first entry. */
  startSkewMs: number;
  /** Entries handled per consumer process (sums to the entries preloaded: nothing twice). */
  handled: number[];
  peakRssMb: number;
  /** Per master (port order): entries it held and its CPU seconds (INFO CPU used_cpu_sys + used_cpu_user) during the drain. */
  masters: { port: number; entries: number; cpuSeconds: number }[];
  /** The three replicas' CPU seconds during the drain, together (they apply the masters' replication stream). */
  replicasCpuSeconds: number;
}

export interface ClusterCase {
  partitions: number;
  consumers: number;
  /** Medians over the rounds. */
  msgsPerSec: number;
  consumerCpuUsPerEntry: number;
  /** The master that spent most CPU in a run (the one that bounds the drain with a core per master). */
  busiestMaster: {
    entries: number;
    cpuSeconds: number;
    /** Its entries ÷ its CPU seconds: what one master drains per CPU-second. */
    entriesPerCpuSecond: number;
  };
  /** Entries ÷ the busiest master's CPU seconds: the drain rate with one core per master (median of the runs'). */
  ceilingOneCorePerMaster: number;
  /** The consumer processes' bound with one core each: processes × 10⁶ ÷ consumer CPU µs per entry. */
  ceilingOneCorePerConsumer: number;
  /** The lower of the two: the drain rate with a core per master and a core per consumer process. */
  ceilingOneCoreEach: number;
  runs: ClusterRun[];
}

export interface ClusterSection {
  date: string;
  smoke: boolean;
  entries: number;
  rounds: number;
  batchSize: number;
  topology: string;
  cases: ClusterCase[];
  /** 6 partitions ÷ 1 partition, same consumer count, measured entries/s. */
  ratios: { consumers1: number; consumers3: number };
  /** 6 partitions ÷ 1 partition, same consumer count, of the one-core-per-master ceilings. */
  ceilingRatios: { consumers1: number; consumers3: number };
  /** 6 partitions ÷ 1 partition, same consumer count, of the lower of the two ceilings. */
  ceilingOneCoreEachRatios: { consumers1: number; consumers3: number };
}

/** The markdown section starts with this line (`--only cluster` replaces the section from it on). */
export const CLUSTER_HEADING = '#### Redis Cluster drain';

const CHILD = fileURLToPath(new URL('./child.js', import.meta.url));
// scripts/ is not compiled: import it from the sources (this file runs from dist/bench-build/bench/).
const LOCAL_CLUSTER = new URL('../../../scripts/local-cluster.mjs', import.meta.url).href;
/** The group of the drains by `consumers` processes. */
const groupOf = (consumers: number) => `bench-${consumers}`;
const PARTITIONS = [1, 6] as const;
const CONSUMERS = [1, 3] as const;

interface Options {
  smoke: boolean;
  batchSize: number;
  log: (line: string) => void;
}

export async function benchCluster({ smoke, batchSize, log }: Options): Promise<ClusterSection> {
  const entries = smoke ? 500 : 100_000;
  const rounds = smoke ? 1 : 5;
  const { startLocalCluster }: typeof import('../scripts/local-cluster.mjs') = await import(LOCAL_CLUSTER);
  const started = performance.now();
  const cluster = await startLocalCluster({ log: (line) => log(`  ${line}`) });
  const children = new Set<ChildProcess>();
  const killChildren = () => children.forEach((c) => c.kill('SIGKILL'));
  process.on('exit', killChildren);
  const nodes = new Map(cluster.ports.map((port) => [port, new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 })]));
  const admin = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  admin.on('error', () => {});
  try {
    const any = nodes.get(cluster.ports[0]!)!;
    const slots = (await any.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, string]][];
    const masterOfSlot = (slot: number) => slots.find(([from, to]) => from <= slot && slot <= to)![2][1];
    const masters = [...new Set(slots.map(([, , master]) => master[1]))].sort((a, b) => a - b);
    const replicas = cluster.ports.filter((port) => !masters.includes(port));
    if (masters.length !== 3) throw new Error(`expected 3 masters, CLUSTER SLOTS names ${masters.join(', ')}`);
    // The replicas' first sync (a fork on each master) must not fall into a measured drain.
    await waitFor(
      async () => {
        for (const port of masters) {
          const info = parseInfo(await nodes.get(port)!.info('replication'));
          if (info.connected_slaves !== '1' || !info.slave0?.includes('state=online')) return false;
        }
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 50, message: 'every master to have its replica online' },
    );
    log(
      `  cluster up in ${((performance.now() - started) / 1000).toFixed(1)} s: masters ${masters.join(', ')}, replicas ${replicas.join(', ')}`,
    );

    const keySlot = async (key: string) => Number(await any.call('CLUSTER', 'KEYSLOT', key));
    let uniq = 0;
    /** A fresh logical stream name; with 6 partitions, one whose partitions land 2/2/2 on the masters. */
    const streamName = async (partitions: number): Promise<string> => {
      for (;;) {
        const name = `bench-cluster-${partitions}p-${++uniq}`;
        if (partitions !== 6) return name;
        const perMaster = new Map<number, number>();
        for (const key of partitionKeys('', name, partitions)) {
          const master = masterOfSlot(await keySlot(key));
          perMaster.set(master, (perMaster.get(master) ?? 0) + 1);
        }
        if (masters.every((m) => perMaster.get(m) === 2)) return name;
      }
    };
    const cpu = async (port: number) => {
      const info = parseInfo(await nodes.get(port)!.info('cpu'));
      return Number(info.used_cpu_sys) + Number(info.used_cpu_user);
    };
    const cpuAll = async () => new Map(await Promise.all(cluster.ports.map(async (port) => [port, await cpu(port)] as const)));

    interface Backlog {
      stream: string;
      partitions: number;
      keys: string[];
      /** Entries per master, by port. */
      perMaster: Map<number, number>;
    }
    /**
     * `entries` entries in a fresh logical stream of `partitions` partitions, with one group per consumer
     * count: the 1-process and the 3-process drains each read the whole backlog through their own group.
     */
    const preload = async (partitions: number): Promise<Backlog> => {
      const stream = await streamName(partitions);
      const keys = partitionKeys('', stream, partitions);
      for (const key of keys) for (const consumers of CONSUMERS) await admin.xgroup('CREATE', key, groupOf(consumers), '0', 'MKSTREAM');
      // Through the client's own routing: no partition key, so round-robin over the partitions.
      const client = new RedisStreamsClient({ connection: cluster.urls, partitions: { [stream]: partitions } });
      for (let i = 0; i < entries; i += 1000) {
        await Promise.all(Array.from({ length: Math.min(1000, entries - i) }, (_, j) => lastValueFrom(client.emit(stream, { n: i + j }))));
      }
      await client.close();
      const perMaster = new Map(masters.map((m) => [m, 0]));
      for (const key of keys) {
        const master = masterOfSlot(await keySlot(key));
        perMaster.set(master, perMaster.get(master)! + Number(await admin.xlen(key)));
      }
      const total = [...perMaster.values()].reduce((a, b) => a + b, 0);
      if (total !== entries) throw new Error(`preloaded ${total} entries into ${stream}, expected ${entries}`);
      return { stream, partitions, keys, perMaster };
    };

    const drain = async ({ stream, partitions, keys, perMaster }: Backlog, consumers: number): Promise<ClusterRun> => {
      const group = groupOf(consumers);
      type Report = { handled: number; first: number; cpuUs: number; peakRssMb: number };
      let onProgress = () => {};
      const handledAll = new Promise<void>((resolve) => {
        onProgress = () => procs.reduce((sum, p) => sum + p.progress, 0) >= entries && resolve();
      });
      const procs = Array.from({ length: consumers }, (_, i) => {
        const args = {
          mode: 'share',
          system: 'nestjs-redis-streams',
          url: cluster.urls[0],
          cluster: cluster.urls,
          key: stream,
          partitions,
          group,
          consumer: `c${i}`,
          batchSize,
          concurrency: 1,
        };
        const proc = spawn(process.execPath, [CHILD, JSON.stringify(args)], { stdio: ['pipe', 'pipe', 'inherit'] });
        children.add(proc);
        const state = {
          proc,
          closed: undefined as unknown as Promise<void>,
          ready: false,
          progress: 0,
          report: undefined as Report | undefined,
        };
        createInterface({ input: proc.stdout! }).on('line', (line) => {
          const msg = JSON.parse(line);
          if (msg.ready) state.ready = true;
          if (msg.progress !== undefined) {
            state.progress = msg.progress;
            onProgress();
          }
          if (msg.handled !== undefined) state.report = msg;
        });
        // 'close' comes after the last line of stdout: a process that closed without its report failed.
        state.closed = new Promise<void>((resolve, reject) =>
          proc.once('close', (code) => {
            children.delete(proc);
            if (state.report && code === 0) resolve();
            else reject(new Error(`consumer process c${i} exited (code ${code}) before its report`));
          }),
        );
        return state;
      });
      const failed = Promise.race(procs.map((p) => p.closed)).then(() => new Promise<never>(() => {}));
      failed.catch(() => {});
      await Promise.race([failed, waitFor(() => procs.every((p) => p.ready), { timeoutMs: 30_000, message: 'consumer processes built' })]);

      const before = await cpuAll();
      for (const p of procs) p.proc.stdin!.write('go\n');
      await Promise.race([failed, handledAll, timeoutAfter(smoke ? 60_000 : 300_000, 'the consumers to handle every entry')]);
      // Done = every entry handled and acknowledged (nothing pending on any partition).
      await waitFor(
        async () => (await Promise.all(keys.map((key) => admin.xpending(key, group) as Promise<[number]>))).every(([n]) => Number(n) === 0),
        {
          timeoutMs: 30_000,
          intervalMs: 2,
          message: 'every partition acknowledged',
        },
      );
      const end = performance.timeOrigin + performance.now();
      const after = await cpuAll();

      for (const p of procs) p.proc.stdin!.write('report\n');
      await Promise.race([failed, waitFor(() => procs.every((p) => p.report), { timeoutMs: 30_000, message: 'consumer reports' })]);
      await Promise.all(procs.map((p) => p.closed));

      const reports = procs.map((p) => p.report!);
      const firsts = reports.filter((r) => r.handled > 0).map((r) => r.first);
      const start = Math.min(...firsts);
      const handled = reports.map((r) => r.handled);
      if (handled.reduce((a, b) => a + b, 0) !== entries)
        throw new Error(`handled ${handled.join(' + ')} entries, expected ${entries} (once each)`);
      const delta = (port: number) => after.get(port)! - before.get(port)!;
      return {
        msgsPerSec: (entries / (end - start)) * 1000,
        consumerCpuUsPerEntry: reports.reduce((sum, r) => sum + r.cpuUs, 0) / entries,
        startSkewMs: Math.max(...firsts) - start,
        handled,
        peakRssMb: Math.max(...reports.map((r) => r.peakRssMb)),
        masters: masters.map((port) => ({ port, entries: perMaster.get(port)!, cpuSeconds: delta(port) })),
        replicasCpuSeconds: replicas.reduce((sum, port) => sum + delta(port), 0),
      };
    };

    const runs = new Map<string, ClusterRun[]>();
    for (let round = 0; round < rounds; round++) {
      const roundStart = performance.now();
      const backlogs = new Map<number, Backlog>();
      for (const partitions of PARTITIONS) backlogs.set(partitions, await preload(partitions));
      log(
        `  round ${round + 1}/${rounds}: ${entries} entries preloaded as 1 and as 6 partitions in ${((performance.now() - roundStart) / 1000).toFixed(1)} s`,
      );
      for (const consumers of CONSUMERS) {
        for (const partitions of PARTITIONS) {
          const run = await drain(backlogs.get(partitions)!, consumers);
          const id = `${partitions}x${consumers}`;
          runs.set(id, [...(runs.get(id) ?? []), run]);
          const busiest = busiestOf(run);
          log(
            `  ${partitions} partition${partitions > 1 ? 's' : ''}, ${consumers} consumer process${consumers > 1 ? 'es' : ''}: ${Math.round(run.msgsPerSec)} entries/s` +
              (consumers > 1 ? ` (handled ${run.handled.join(' / ')}, start skew ${run.startSkewMs.toFixed(0)} ms)` : '') +
              `; busiest master ${(busiest.cpuSeconds * 1000).toFixed(0)} ms CPU for ${busiest.entries} entries; consumers ${run.consumerCpuUsPerEntry.toFixed(1)} µs CPU per entry`,
          );
        }
      }
      for (const backlog of backlogs.values()) for (const key of backlog.keys) await admin.del(key);
    }

    const cases: ClusterCase[] = [];
    for (const consumers of CONSUMERS) {
      for (const partitions of PARTITIONS) {
        const caseRuns = runs.get(`${partitions}x${consumers}`)!;
        const busiest = caseRuns.map(busiestOf);
        const consumerCpuUsPerEntry = median(caseRuns.map((r) => r.consumerCpuUsPerEntry));
        const ceilingOneCorePerMaster = median(busiest.map((b) => entries / b.cpuSeconds));
        const ceilingOneCorePerConsumer = (consumers * 1e6) / consumerCpuUsPerEntry;
        cases.push({
          partitions,
          consumers,
          msgsPerSec: median(caseRuns.map((r) => r.msgsPerSec)),
          consumerCpuUsPerEntry,
          busiestMaster: {
            entries: median(busiest.map((b) => b.entries)),
            cpuSeconds: median(busiest.map((b) => b.cpuSeconds)),
            entriesPerCpuSecond: median(busiest.map((b) => b.entries / b.cpuSeconds)),
          },
          ceilingOneCorePerMaster,
          ceilingOneCorePerConsumer,
          ceilingOneCoreEach: Math.min(ceilingOneCorePerMaster, ceilingOneCorePerConsumer),
          runs: caseRuns,
        });
      }
    }
    const find = (partitions: number, consumers: number) => cases.find((c) => c.partitions === partitions && c.consumers === consumers)!;
    const ratio = (consumers: number, of: (c: ClusterCase) => number) => of(find(6, consumers)) / of(find(1, consumers));
    return {
      date: new Date().toISOString(),
      smoke,
      entries,
      rounds,
      batchSize,
      topology: '3 masters + 3 replicas (one redis-server process each, cluster-node-timeout 2000, no persistence) on 127.0.0.1',
      cases,
      ratios: { consumers1: ratio(1, (c) => c.msgsPerSec), consumers3: ratio(3, (c) => c.msgsPerSec) },
      ceilingRatios: { consumers1: ratio(1, (c) => c.ceilingOneCorePerMaster), consumers3: ratio(3, (c) => c.ceilingOneCorePerMaster) },
      ceilingOneCoreEachRatios: { consumers1: ratio(1, (c) => c.ceilingOneCoreEach), consumers3: ratio(3, (c) => c.ceilingOneCoreEach) },
    };
  } finally {
    killChildren();
    process.off('exit', killChildren);
    admin.disconnect();
    nodes.forEach((n) => n.disconnect());
    await cluster.stop();
    log(`  cluster section took ${((performance.now() - started) / 1000).toFixed(1)} s (cluster stopped)`);
  }
}

/** The markdown of the section, starting with {@link CLUSTER_HEADING}. */
export function clusterMarkdown(r: ClusterSection): string {
  const n = (v: number, digits = 0) =>
    Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits }) : '—';
  const x = (v: number) => `${v.toFixed(2)}×`;
  const find = (partitions: number, consumers: number) => r.cases.find((c) => c.partitions === partitions && c.consumers === consumers)!;
  /** The 6 ÷ 1 ratio of `ratios` on the row of a 6-partition case; 1.00× on the 1-partition rows. */
  const ratioOf = (c: ClusterCase, ratios: { consumers1: number; consumers3: number }) =>
    c.partitions === 1 ? '1.00×' : x(c.consumers === 1 ? ratios.consumers1 : ratios.consumers3);
  const [six1, six3, one3] = [find(6, 1), find(6, 3), find(1, 3)];
  /** Consumer processes at which the consumers' bound meets the masters' one. */
  const saturate = (c: ClusterCase) => (c.ceilingOneCorePerMaster * c.consumerCpuUsPerEntry) / 1e6;
  const b = six3.busiestMaster;
  return [
    `${CLUSTER_HEADING} ${r.smoke ? '(SMOKE sizes: these ratios and ceilings mean nothing, they only show that the section runs) ' : ''}— ${r.date}`,
    '',
    `One logical stream on a local Redis Cluster, ${r.topology}, on this machine together with the consumers. ` +
      `${n(r.entries)} entries preloaded through RedisStreamsClient (option \`partitions\`, no partition key: round-robin), either as 1 partition (one key \`{stream:0}\`) ` +
      `or as 6 (\`{stream:0}\` … \`{stream:5}\`, stream names chosen so that the 6 land 2/2/2 on the 3 masters); drained by 1 or 3 consumer processes of nestjs-redis-streams ` +
      `(\`@StreamPattern(stream, { partitions })\`, batch ${r.batchSize}, no-op handler; the 1-process and the 3-process drain each read the whole backlog through a group of their own), ` +
      `timed from the first entry handled to the last one acknowledged. The four cases take turns ${r.rounds} time${r.rounds > 1 ? 's' : ''}, each round on a fresh backlog; medians shown.`,
    '',
    '| cluster drain | partitions | consumer processes | entries/s (runs) | 6 ÷ 1 partition | consumer CPU µs / entry | busiest master: entries / CPU ms | entries per master CPU-second | ceiling, a core per master | 6 ÷ 1 partition | ceiling, a core per consumer process | lower of the two ceilings | 6 ÷ 1 partition |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...r.cases.map((c) =>
      [
        'nestjs-redis-streams, Redis Cluster',
        c.partitions,
        c.consumers,
        `${n(c.msgsPerSec)} (${c.runs.map((run) => n(run.msgsPerSec)).join(', ')})`,
        ratioOf(c, r.ratios),
        n(c.consumerCpuUsPerEntry, 1),
        `${n(c.busiestMaster.entries)} / ${n(c.busiestMaster.cpuSeconds * 1000, 1)}`,
        n(c.busiestMaster.entriesPerCpuSecond),
        n(c.ceilingOneCorePerMaster),
        ratioOf(c, r.ceilingRatios),
        n(c.ceilingOneCorePerConsumer),
        n(c.ceilingOneCoreEach),
        ratioOf(c, r.ceilingOneCoreEachRatios),
      ]
        .join(' | ')
        .replace(/^/, '| ')
        .replace(/$/, ' |'),
    ),
    '',
    `Measured on this machine: 6 partitions ÷ 1 partition = ${x(r.ratios.consumers1)} with 1 consumer process, ${x(r.ratios.consumers3)} with 3. ` +
      `Its ${cpuCount()} cores serve 6 redis-servers and the consumer processes at once (the replicas apply every read and ack too: ` +
      `${n(median(six3.runs.map((run) => run.replicasCpuSeconds)) * 1000)} CPU ms together in the 6-partition, 3-process drain, against ${n(median(six3.runs.map((run) => run.masters.reduce((sum, m) => sum + m.cpuSeconds, 0))) * 1000)} for the 3 masters), ` +
      `so these ratios are this machine's ceiling, not the cluster's.`,
    '',
    `Per master, and how the ceiling columns are derived: during each drain INFO CPU (used_cpu_sys + used_cpu_user) is read on every node just before the consumers start and again once every entry is acknowledged; ` +
      `a master's delta is the CPU it spent serving that drain. With 6 partitions and 3 consumer processes the busiest master spent ${n(b.cpuSeconds * 1000, 1)} CPU ms on its ${n(b.entries)} entries: ` +
      `a master drains ${n(b.entriesPerCpuSecond)} entries per CPU-second. With a core of its own a master gets through its share in that CPU time, so the drain ends no sooner than the busiest master's CPU time allows: ` +
      `${n(r.entries)} entries ÷ ${n(b.cpuSeconds * 1000, 1)} ms = ${n(six3.ceilingOneCorePerMaster)} entries/s, about 3 × the per-master rate since each master holds a third of the entries. ` +
      `With 1 partition one master holds every entry, and its rate is the ceiling: ${n(one3.ceilingOneCorePerMaster)} entries/s (3 processes), so with a core per master 6 partitions would drain ${x(r.ceilingRatios.consumers3)} as fast as 1 ` +
      `(${x(r.ceilingRatios.consumers1)} with 1 process). ` +
      `The consumers bound the drain as well: a process with a core of its own handles at most 10⁶ ÷ its CPU µs per entry, ${n(six1.ceilingOneCorePerConsumer)} entries/s for 1 process and ${n(six3.ceilingOneCorePerConsumer)} for 3 on 6 partitions; ` +
      `the lower of the two ceilings is what a core per master and per consumer process would reach (6 ÷ 1 partition: ${x(r.ceilingOneCoreEachRatios.consumers1)} with 1 process, ${x(r.ceilingOneCoreEachRatios.consumers3)} with 3), ` +
      `and more consumer processes raise the consumer bound up to the masters' one: at the CPU per entry of the 3-process drains, about ${n(saturate(one3), 1)} processes saturate the one master of 1 partition, ` +
      `about ${n(saturate(six3), 1)} the three masters of 6 partitions (ceiling, a core per master × consumer µs per entry ÷ 10⁶). Both ceilings take the CPU per entry measured here as given (here every process shares ${cpuCount()} cores; on cores of their own it may differ), so they are estimates, not measurements.`,
  ].join('\n');
}

function busiestOf(run: ClusterRun): { entries: number; cpuSeconds: number } {
  return run.masters.reduce((a, b) => (b.cpuSeconds > a.cpuSeconds ? b : a));
}

function cpuCount(): number {
  return cpus().length;
}

function timeoutAfter(ms: number, what: string): Promise<never> {
  return new Promise((_, reject) => setTimeout(() => reject(new Error(`bench: timed out after ${ms} ms waiting for ${what}`)), ms).unref());
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.5 * sorted.length))]!;
}
