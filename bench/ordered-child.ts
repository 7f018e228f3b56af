// A worker of the ordered section (bench/ordered.ts), in a process of its own: one StreamConsumer
// (nestjs-redis-streams/core) at a time, on the run's pattern and keyPrefix, ordered or not.
// The process lives across the section's runs; each run gets a new consumer (its own keyPrefix).
// Protocol, one JSON line each way:
//   {"cmd":"start", …OrderedRun}  → builds and starts the consumer   → {"started":true}
//   {"cmd":"status"}              → {"owned":n,"members":[…]}   (health(): partitions owned, members seen)
//   {"cmd":"mark"}                → {"marked":true}            (CPU counted from here)
//   {"cmd":"stop"}                → closes the consumer         → {"report":OrderedChildReport}
//   {"cmd":"exit"}                → exits at once
import { createInterface } from 'node:readline';
import { StreamConsumer } from 'nestjs-redis-streams/core';
import type { DurableAcks } from 'nestjs-redis-streams';

export interface OrderedChildArgs {
  url: string;
  /** This worker's consumer name (unique in the group). */
  consumer: string;
}

export interface OrderedRun {
  keyPrefix: string;
  pattern: string;
  group: string;
  ordered: boolean;
  partitions: number;
  concurrency: number;
  batchSize: number;
  blockMs: number;
  minIdleMs: number;
  leaseRenewMs: number;
  /** 0: a no-op handler; otherwise the handler awaits a timer of this many ms. */
  handlerMs: number;
  /** The durability section's runs: the ordered pattern's durable acks. */
  durableAcks?: DurableAcks;
  /** The fair section's runs (bench/fair.ts): `fair: { inHand }` on the pattern (not with `ordered`). */
  fairInHand?: number;
  /** The priorities rows (bench/fair.ts): `priorities: { levels }` on the pattern; `spreadLevels`: the backlog over every level. */
  priorityLevels?: number;
  spreadLevels?: boolean;
}

export interface OrderedChildReport {
  handled: number;
  /** The clock (performance.timeOrigin + now) at the first and last handler start; 0 when none. */
  firstAt: number;
  lastAt: number;
  /** CPU µs (user + system) of this process from `mark` to `stop`. */
  cpuUs: number;
  /** Handler starts of a key that came before an earlier-written entry of the same key had started here. */
  outOfOrder: number;
  /** Handler starts of a key while another entry of the same key was still in its handler here. */
  overlaps: number;
}

const args = JSON.parse(process.argv[2]!) as OrderedChildArgs;
const emit = (value: unknown) => process.stdout.write(JSON.stringify(value) + '\n');
const now = () => performance.timeOrigin + performance.now();

let consumer: StreamConsumer | undefined;
let report: OrderedChildReport = fresh();
let cpuAtMark = process.cpuUsage();
/** Per key: the highest sequence number started here, and how many of its entries are in the handler. */
let lastSeq = new Map<string, number>();
let running = new Map<string, number>();

function fresh(): OrderedChildReport {
  return { handled: 0, firstAt: 0, lastAt: 0, cpuUs: 0, outOfOrder: 0, overlaps: 0 };
}

async function start(run: OrderedRun): Promise<void> {
  report = fresh();
  lastSeq = new Map();
  running = new Map();
  const wait = run.handlerMs;
  const handler = async (data: { s: number }, ctx: { getFields(): Record<string, string> }) => {
    const at = now();
    if (report.handled++ === 0) report.firstAt = at;
    report.lastAt = at;
    const key = ctx.getFields()['partitionKey']!;
    if ((lastSeq.get(key) ?? -1) > data.s) report.outOfOrder++;
    else lastSeq.set(key, data.s);
    const inHandler = running.get(key) ?? 0;
    if (inHandler > 0) report.overlaps++;
    running.set(key, inHandler + 1);
    try {
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    } finally {
      running.set(key, running.get(key)! - 1);
    }
  };
  consumer = new StreamConsumer({
    connection: args.url,
    group: run.group,
    consumer: args.consumer,
    keyPrefix: run.keyPrefix,
    concurrency: run.concurrency,
    batchSize: run.batchSize,
    blockMs: run.blockMs,
    minIdleMs: run.minIdleMs,
    leaseRenewMs: run.leaseRenewMs,
    telemetry: false,
    logger: false,
  }).handle(run.pattern, handler, {
    partitions: run.partitions,
    ordered: run.ordered,
    ...(run.durableAcks ? { durableAcks: run.durableAcks } : {}),
    ...(run.fairInHand ? { fair: { inHand: run.fairInHand } } : {}),
    ...(run.priorityLevels ? { priorities: { levels: run.priorityLevels } } : {}),
  });
  await consumer.start();
}

async function status(): Promise<{ owned: number; members: number[] }> {
  const health = await consumer!.health({ stats: false });
  const ordering = health.streams.map((s) => s.ordering).filter((o) => o !== undefined);
  return { owned: ordering.filter((o) => o.owned).length, members: ordering.map((o) => o.members) };
}

async function stop(): Promise<OrderedChildReport> {
  const cpu = process.cpuUsage(cpuAtMark);
  report.cpuUs = cpu.user + cpu.system;
  await consumer?.close();
  consumer = undefined;
  return report;
}

// One command at a time, in order: each answers before the next is read.
let queue = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  const command = JSON.parse(line) as { cmd: string } & OrderedRun;
  // At once, whatever is still queued: the section is over (or failed).
  if (command.cmd === 'exit') process.exit(0);
  queue = queue.then(async () => {
    try {
      if (command.cmd === 'start') emit({ started: (await start(command), true) });
      else if (command.cmd === 'status') emit(await status());
      else if (command.cmd === 'mark') emit({ marked: ((cpuAtMark = process.cpuUsage()), true) });
      else if (command.cmd === 'stop') emit({ report: await stop() });
    } catch (err) {
      emit({ error: String(err) });
    }
  });
});
emit({ ready: true });
