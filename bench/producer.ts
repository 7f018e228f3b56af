// The one producer of the steady-state rows, in a process of its own: the same program writes the
// same entries (`n` of them, field `t` = its clock when the entry was written, in bursts of `burst`,
// one burst in flight) for every system, at full speed or paced at `rate` msgs/s. Stream systems get
// XADDs (one pipeline per burst), BullMQ jobs (one addBulk per burst: a queue, not a stream, so not the
// very same entries), Nest's Transport.REDIS messages (one emit each, a burst awaited together).
// Protocol: prints {"ready":true} once connected, produces on "go" from stdin, prints its summary, exits.
import { Logger } from '@nestjs/common';
import { ClientProxyFactory, Transport, type ClientProxy } from '@nestjs/microservices';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { createInterface } from 'node:readline';
import { lastValueFrom } from 'rxjs';

export interface ProducerArgs {
  url: string;
  kind: 'stream' | 'bullmq' | 'pubsub';
  key: string;
  n: number;
  burst: number;
  /** msgs/s; absent: full speed. */
  rate?: number;
}

export interface ProducerSummary {
  sent: number;
  /** Clock (performance.timeOrigin + now) when the first burst was written and when the last was confirmed. */
  firstAt: number;
  lastAt: number;
  /** The producer's CPU (user + system) from "go" to its last burst confirmed, µs. */
  cpuUs: number;
}

Logger.overrideLogger(['error']);
const args = JSON.parse(process.argv[2]!) as ProducerArgs;
const now = () => performance.timeOrigin + performance.now();
/** An entry's timestamp: unique per entry (sub-µs clock), which the stage timing relies on. */
const t = () => String(now());
const emit = (value: unknown, then?: () => void) => process.stdout.write(JSON.stringify(value) + '\n', then);

const sink = await open();
emit({ ready: true });
await new Promise<void>((resolve) => createInterface({ input: process.stdin }).on('line', (line) => line.trim() === 'go' && resolve()));

const firstAt = now();
const cpuAtGo = process.cpuUsage();
let sent = 0;
// Paced: burst i is due at firstAt + i × burst ÷ rate (a schedule, so a late burst does not delay the rest).
for (let i = 0; sent < args.n; i++) {
  if (args.rate !== undefined) {
    const due = firstAt + (i * args.burst * 1000) / args.rate;
    const wait = due - now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  const size = Math.min(args.burst, args.n - sent);
  await sink.burst(size);
  sent += size;
}
const cpu = process.cpuUsage(cpuAtGo);
const summary: ProducerSummary = { sent, firstAt, lastAt: now(), cpuUs: cpu.user + cpu.system };
await sink.close();
emit(summary, () => process.exit(0));

async function open(): Promise<{ burst(n: number): Promise<void>; close(): Promise<void> }> {
  if (args.kind === 'bullmq') {
    const queue = new Queue(args.key, { connection: { url: args.url } });
    await queue.waitUntilReady();
    return {
      burst: async (n) => void (await queue.addBulk(Array.from({ length: n }, () => ({ name: 'job', data: { t: t() } })))),
      close: () => queue.close(),
    };
  }
  if (args.kind === 'pubsub') {
    const { hostname, port } = new URL(args.url);
    const client: ClientProxy = ClientProxyFactory.create({ transport: Transport.REDIS, options: { host: hostname, port: Number(port) } });
    await client.connect();
    return {
      burst: async (n) =>
        void (await Promise.all(
          Array.from({ length: n }, () => lastValueFrom(client.emit(args.key, { t: t() }), { defaultValue: undefined })),
        )),
      close: async () => void (await client.close()),
    };
  }
  const redis = new Redis(args.url);
  await redis.ping();
  return {
    burst: async (n) => {
      const p = redis.pipeline();
      for (let i = 0; i < n; i++) p.xadd(args.key, '*', 't', t());
      await p.exec();
    },
    close: async () => void (await redis.quit()),
  };
}
