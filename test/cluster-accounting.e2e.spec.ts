import { appendFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { partitionKeys } from 'nestjs-redis-streams';
import { inspectStreams } from '../libs/redis-streams/src/ops/stream-reports.js';
import { HandledLog, ProducedLog } from './support/accounting.js';
import { startFixture } from './support/fixture-process.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { startCluster, type TestCluster } from './support/redis-cluster.js';
import { SERVER_BIN } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

// The accounting run of issue 48, on a local 3+3 cluster: a producer process and two worker processes (the built
// plain-Node StreamConsumer) over an ordered partitioned pattern and an unordered one with delayed entries and entries
// that fail once and wait for their retry, counted outside the processes (test/support/accounting.ts). Faults in order:
// the replication of one master cut under load (its replica frozen, its link killed), then that master killed -9
// together with the worker owning its ordered partition (its replica, thawed, is promoted without what the master
// took meanwhile; the other worker takes the partition over), the killed node started again (it rejoins as a
// replica), then a manual failover of another shard. With durable produce and durable acks nothing acknowledged is
// lost and no key runs out of order; with the defaults the window is measured and printed (`accounting figures:`,
// for docs/failure-semantics.md's table).
//
// ACCOUNTING_RUNS=5 repeats each mode; ACCOUNTING_RATE (emits/s, default 150) and ACCOUNTING_WINDOW (emits answered
// while the link is cut, default 250) make the window longer.
const RUNS = Number(process.env.ACCOUNTING_RUNS ?? 1);
const RATE = Number(process.env.ACCOUNTING_RATE ?? 150);
const WINDOW = Number(process.env.ACCOUNTING_WINDOW ?? 250);
const PARTITIONS = 4;

let cluster: TestCluster;
beforeAll(async () => (cluster = await startCluster()), 60_000);
afterAll(async () => cluster?.stop());

const { children, dirs } = useLeftoversAfterEach();

type Mode = 'durable' | 'defaults';

/** The producer's client options and the workers' server options of each mode. */
const SETTINGS: Record<Mode, { producer: object; worker: object }> = {
  durable: {
    producer: { durability: { replicas: 1, timeoutMs: 500 } },
    worker: { durableAcks: { replicas: 1, timeoutMs: 300, whenUnconfirmed: 'hold' } },
  },
  defaults: { producer: {}, worker: {} },
};

interface Figures {
  mode: Mode;
  server: string;
  run: number;
  /** Emits answered: acknowledged, NotDurableError, other failure. */
  emits: number;
  acknowledged: number;
  notDurable: number;
  otherFailures: number;
  /** Acknowledged emits whose record is nowhere (no stream, schedule or dead-letter stream) and was never handled. */
  lost: number;
  /** Acknowledged records handled on the master, then lost with it (gone from every stream). */
  lostAfterHandling: number;
  /** Ordered entries started again after a later entry of their key started. */
  rerunsAfterLater: number;
  /** Starts of an ordered key while another handling of it ran. */
  overlaps: number;
  /** Records present in a stream at the end and never handled. */
  neverHandled: number;
  /** Acknowledged records never handled (lost or not). */
  acknowledgedNotHandled: number;
  /** Records dead-lettered (none fail more than once: expected 0). */
  deadLettered: number;
  /** Handlings beyond the first of a record (at-least-once). */
  duplicates: number;
  /** The other failures' messages (ids and numbers masked), by count. */
  failures: Record<string, number>;
  killed: string;
  failedOver: string;
  wallMs: number;
}

/** Every record number in `values` (payloads `{"n":…}` wherever they are copied: entries, schedules, dead letters). */
function numbersIn(values: string[], into: Set<number>): void {
  for (const value of values) for (const m of value.matchAll(/"n":(\d+)/g)) into.add(Number(m[1]));
}

async function scenario(mode: Mode, run: number): Promise<Figures> {
  const t0 = performance.now();
  const timeline: string[] = [];
  const mark = (what: string) => timeline.push(`${Math.round(performance.now() - t0)} ms ${what}`);
  const prefix = uniquePrefix();
  const dir = mkdtempSync(join(tmpdir(), 'accounting-'));
  dirs.push(dir);
  const [producedPath, handledPath] = [join(dir, 'produced.log'), join(dir, 'handled.log')];
  writeFileSync(producedPath, '');
  writeFileSync(handledPath, '');
  const orders = partitionKeys(prefix, 'orders', PARTITIONS);
  const events = partitionKeys(prefix, 'events', PARTITIONS);
  const streams = [...orders, ...events];
  const produced = new ProducedLog(producedPath);
  const handled = new HandledLog(handledPath, (stream) => orders.includes(stream));

  // The shard to kill serves an ordered partition and an unordered one; the one failed over, another ordered partition.
  const masterOf = new Map<string, number>();
  for (const stream of streams) masterOf.set(stream, await cluster.masterOf(stream));
  const victimKey = orders.find((o) => events.some((e) => masterOf.get(e) === masterOf.get(o)));
  const failKey = orders.find((o) => masterOf.get(o) !== masterOf.get(victimKey ?? ''));
  expect(victimKey && failKey).toBeTruthy();

  const { producer: producerOptions, worker: workerOptions } = SETTINGS[mode];
  const workers = await Promise.all(
    ['w1', 'w2'].map(async (name) => ({
      name,
      ...(await startFixture(children, 'cluster-accounting-worker.mjs', [
        JSON.stringify(cluster.urls),
        prefix,
        name,
        handledPath,
        String(PARTITIONS),
        JSON.stringify(workerOptions),
      ])),
    })),
  );
  const producer = await startFixture(children, 'cluster-accounting-producer.mjs', [
    JSON.stringify(cluster.urls),
    prefix,
    producedPath,
    String(RATE),
    String(PARTITIONS),
    JSON.stringify(producerOptions),
  ]);
  mark('load on');
  const handledCount = () => handled.poll().handled.size;
  const answered = () => produced.answered();
  /** Load goes on until `count` more emits were answered. */
  const moreAnswered = async (count: number, what: string) => {
    const from = answered();
    await waitFor(() => answered() >= from + count, { message: `${count} more emits answered ${what}`, progress: answered });
  };

  let killed = '';
  let failedOver = '';
  const admin = cluster.client();
  /** What the streams, schedules and dead-letter streams hold now, by record number; and what is still pending. */
  const holdings = async () => {
    const inStreams = new Set<number>();
    const elsewhere = new Set<number>();
    const dead = new Set<number>();
    let pending = 0;
    for (const stream of streams) {
      numbersIn(
        (await admin.xrange(stream, '-', '+')).flatMap(([, fields]) => fields),
        inStreams,
      );
      numbersIn(await admin.hvals(`${stream}:delayed:entries`), elsewhere);
      numbersIn(
        (await admin.xrange(`${stream}:dead`, '-', '+')).flatMap(([, fields]) => fields),
        dead,
      );
      pending += Number(((await admin.xpending(stream, 'g')) as [number])[0]);
    }
    return { inStreams, elsewhere, dead, pending };
  };
  const figures = async (): Promise<Figures> => {
    handled.poll();
    produced.answered();
    const { inStreams, elsewhere, dead } = await holdings();
    const present = (n: number) => inStreams.has(n) || elsewhere.has(n) || dead.has(n);
    const acknowledged = [...produced.acknowledged.keys()];
    const handlings = [...handled.handled.values()].reduce((a, b) => a + b, 0);
    return {
      mode,
      server: SERVER_BIN,
      run,
      emits: answered(),
      acknowledged: acknowledged.length,
      notDurable: produced.notDurable.size,
      otherFailures: produced.failed.size,
      lost: acknowledged.filter((n) => !handled.handled.has(n) && !present(n)).length,
      lostAfterHandling: acknowledged.filter((n) => handled.handled.has(n) && !present(n)).length,
      rerunsAfterLater: handled.rerunsAfterLater.size,
      overlaps: handled.overlaps.length,
      neverHandled: [...inStreams].filter((n) => !handled.handled.has(n)).length,
      acknowledgedNotHandled: acknowledged.filter((n) => !handled.handled.has(n)).length,
      deadLettered: dead.size,
      duplicates: handlings - handled.handled.size,
      failures: Object.fromEntries(
        Object.entries(
          [...produced.failed.values()].reduce<Record<string, number>>((by, m) => {
            const what = m.replace(/^\S+ /, '').replace(/\d+/g, '#').slice(0, 80);
            by[what] = (by[what] ?? 0) + 1;
            return by;
          }, {}),
        ).sort(([, a], [, b]) => b - a),
      ),
      killed,
      failedOver,
      wallMs: Math.round(performance.now() - t0),
    };
  };
  /** A failure's message: where the run was, what it counted, what the workers logged and what the cluster looks like. */
  const explain = async (err: unknown): Promise<Error> => {
    const counted = await figures().catch((e: unknown) => `(figures failed: ${String(e)})`);
    const tail = (text: string) => text.trimEnd().split('\n').slice(-40).join('\n');
    return new Error(
      [
        String(err instanceof Error ? err.message : err),
        `figures so far: ${JSON.stringify(counted)}`,
        `overlaps: ${handled.overlaps.slice(0, 5).join('; ')}`,
        ...timeline,
        ...workers.map((w) => `--- worker ${w.name} ---\n${tail(w.out())}`),
        `--- producer ---\n${tail(producer.out())}`,
        await cluster.describe(),
      ].join('\n'),
      { cause: err },
    );
  };

  try {
    await waitFor(() => handledCount() >= 300, { message: '300 records handled', timeoutMs: 20_000, progress: handledCount });

    // (a) The window: the replica of the victim's master frozen and its link killed, so what the master takes from now
    // on is on it alone; then that master killed -9 and the replica thawed, to be promoted without it.
    const { master: victim, replica } = await cluster.cutReplica(victimKey!);
    mark(`replication of ${victim} cut (replica ${replica} frozen)`);
    await moreAnswered(WINDOW, 'while the link is cut');
    // With the master goes the worker owning its ordered partition (one host lost with both): the other worker takes
    // the partition over with what is pending there, among it entries whose acks died with the master. (An owner
    // that lives on remembers what it settled and does not run it again; a new owner cannot know.)
    const owner = (await inspectStreams(admin, [victimKey!], 'g'))[0]?.groups[0]?.ordering?.consumer;
    const crashed = workers.find((w) => w.name === owner) ?? workers[0]!;
    crashed.child.kill('SIGKILL');
    await cluster.kill(victim);
    await waitFor(() => crashed.child.exitCode !== null || crashed.child.signalCode !== null, { message: `worker ${crashed.name} gone` });
    appendFileSync(handledPath, `K ${crashed.child.pid}\n`);
    cluster.thaw(replica);
    mark(`${victim} and worker ${crashed.name} (owner of ${victimKey}: ${owner}) killed, ${replica} thawed`);
    const promoted = await cluster.takenOver(victimKey!, victim);
    killed = `${victim} → ${promoted}`;
    mark(`${promoted} took over`);

    // (b) The killed node back (same port, same nodes.conf): a replica of the promoted one.
    const revived = await cluster.revive(victim);
    mark(`${victim} revived as a replica of ${revived.master}`);
    await moreAnswered(150, 'after the revival');

    // (c) A manual failover of another shard.
    const manual = await cluster.failover(failKey!);
    failedOver = `${manual.oldMaster} → ${manual.newMaster}`;
    mark(`manual failover ${failedOver}`);
    await moreAnswered(150, 'after the manual failover');

    producer.child.kill('SIGTERM');
    await waitFor(() => producer.child.exitCode !== null, { message: 'the producer to stop', timeoutMs: 20_000 });
    mark(`producer stopped (${producer.out().trim().split('\n').at(-1)})`);

    // Drained: nothing pending, nothing waiting in a schedule, every record in a stream handled.
    await waitFor(
      async () => {
        handled.poll();
        const { inStreams, elsewhere, pending } = await holdings();
        return pending === 0 && elsewhere.size === 0 && [...inStreams].every((n) => handled.handled.has(n));
      },
      { message: 'everything in the streams handled and settled', timeoutMs: 20_000, intervalMs: 250, progress: handledCount },
    );
    mark('drained');
  } catch (err) {
    throw await explain(err);
  }
  const counted = await figures();
  console.log(`accounting figures: ${JSON.stringify(counted)}`);
  if (counted.overlaps > 0 || counted.rerunsAfterLater > 0)
    console.log(`accounting: ${[...handled.overlaps, ...handled.rerunsAfterLater].slice(0, 10).join('; ')}`);
  console.log(`accounting timeline (${mode}): ${timeline.join(' | ')}`);
  return counted;
}

describe('accounting through a master killed with its replica lagging, its return and a manual failover (3+3 cluster)', () => {
  for (let run = 1; run <= RUNS; run++) {
    const suffix = RUNS > 1 ? ` (run ${run} of ${RUNS})` : '';
    it(`durable produce and durable acks ('hold'): nothing acknowledged lost, no key out of order, every acknowledged record handled${suffix}`, async () => {
      const f = await scenario('durable', run);
      // The window was there: emits to the cut master were refused as not durable.
      expect(f.notDurable).toBeGreaterThan(0);
      expect(f.lost).toBe(0);
      expect(f.lostAfterHandling).toBe(0);
      expect(f.rerunsAfterLater).toBe(0);
      expect(f.overlaps).toBe(0);
      expect(f.acknowledgedNotHandled).toBe(0);
      expect(f.neverHandled).toBe(0);
    }, 120_000);

    it(`the defaults: every record in a stream handled; the window measured${suffix}`, async () => {
      const f = await scenario('defaults', run);
      expect(f.notDurable).toBe(0);
      expect(f.neverHandled).toBe(0);
      // The window was forced: what the master took while cut was lost with it (else the durable run proves nothing).
      expect(f.lost + f.lostAfterHandling + f.rerunsAfterLater).toBeGreaterThan(0);
    }, 120_000);
  }
});
