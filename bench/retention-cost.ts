// npm run bench:retention [-- --smoke]: what a `safe` retention emit costs against a plain one
// (`MAXLEN ~`), while a group is LAG entries behind, on one throwaway redis-server in one run.
// Redis is single-threaded: the server-side time of each emit is what every other client waits for.
// Then (retention-memory.ts) what each retention mode leaves of a stream in memory, on Redis 7.0 and
// Redis 8.6 side by side, and what an inline `XADD … ACKED` would cost on 8.6.
import { Logger } from '@nestjs/common';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { RedisStreamsClient, type RetentionPolicy } from 'nestjs-redis-streams';
import { SERVER_BIN, startRedis } from '../test/support/redis-server.js';
import { inlineAckedCost, memorySection } from './retention-memory.js';

Logger.overrideLogger(['error']);
const { values: flags } = parseArgs({ options: { smoke: { type: 'boolean', default: false } } });
const LAG = flags.smoke ? 5_000 : 50_000;
const MAX_LEN = 1_000;
const ROUNDS = flags.smoke ? 1 : 5;
const PER_ROUND = flags.smoke ? 200 : 2_000;

const redis = await startRedis();
const admin = new Redis(redis.url);
const log = (line: string) => process.stderr.write(`retention-cost: ${line}\n`);

/** A stream whose group has read nothing of LAG entries: nothing of it may be trimmed safely. */
async function laggingStream(key: string): Promise<void> {
  await admin.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
  for (let done = 0; done < LAG; done += 5_000) {
    const pipeline = admin.pipeline();
    for (let i = done; i < Math.min(LAG, done + 5_000); i++) pipeline.xadd(key, '*', 'data', JSON.stringify({ i }));
    await pipeline.exec();
  }
}

/** Server-side calls and µs of the commands an emit sends (XADD, and EVALSHA for the trim script). */
async function serverStats(): Promise<Record<string, { calls: number; usec: number }>> {
  const stats = await admin.info('commandstats');
  const out: Record<string, { calls: number; usec: number }> = {};
  for (const name of ['xadd', 'evalsha', 'eval']) {
    const m = new RegExp(`cmdstat_${name}:calls=(\\d+),usec=(\\d+)`).exec(stats);
    out[name] = { calls: Number(m?.[1] ?? 0), usec: Number(m?.[2] ?? 0) };
  }
  return out;
}

interface Run {
  clientUs: number;
  serverUs: number;
  xaddUs: number;
  scriptUs: number;
  scriptCalls: number;
}

async function measure(policy: RetentionPolicy, key: string): Promise<Run> {
  const client = new RedisStreamsClient({ connection: redis.url, retention: policy });
  await client.connect();
  await lastValueFrom(client.emit(key, { warm: true })); // loads the script, opens the connection
  await admin.config('RESETSTAT');
  const start = performance.now();
  for (let i = 0; i < PER_ROUND; i++) await lastValueFrom(client.emit(key, { i }));
  const clientUs = ((performance.now() - start) * 1000) / PER_ROUND;
  const stats = await serverStats();
  const server = Object.values(stats).reduce((sum, c) => sum + c.usec, 0) / PER_ROUND;
  await client.close();
  const script = stats.evalsha!.calls > 0 ? stats.evalsha!.usec / stats.evalsha!.calls : 0;
  return { clientUs, serverUs: server, xaddUs: stats.xadd!.usec / stats.xadd!.calls, scriptUs: script, scriptCalls: stats.evalsha!.calls };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

log(`redis-server ${redis.url}; group ${LAG} entries behind; maxLen ${MAX_LEN}; ${ROUNDS} interleaved rounds of ${PER_ROUND} emits`);
await laggingStream('plain');
await laggingStream('safe');
const plain: Run[] = [];
const safe: Run[] = [];
for (let round = 0; round < ROUNDS; round++) {
  plain.push(await measure({ maxLen: MAX_LEN }, 'plain'));
  safe.push(await measure({ maxLen: MAX_LEN, safe: true }, 'safe'));
}
const [safeLeft, plainLeft] = [await admin.xlen('safe'), await admin.xlen('plain')];
const row = (name: string, runs: Run[]) =>
  `${name.padEnd(22)} server ${median(runs.map((r) => r.serverUs))
    .toFixed(1)
    .padStart(7)} µs/emit   client ${median(runs.map((r) => r.clientUs))
    .toFixed(1)
    .padStart(
      7,
    )} µs/emit   (XADD ${median(runs.map((r) => r.xaddUs)).toFixed(1)} µs; trim script ${median(runs.map((r) => r.scriptUs)).toFixed(1)} µs × ${median(runs.map((r) => r.scriptCalls))} calls)`;
console.log(row('plain (MAXLEN ~)', plain));
console.log(row('safe (trim script)', safe));
console.log(
  `safe ÷ plain: server ${(median(safe.map((r) => r.serverUs)) / median(plain.map((r) => r.serverUs))).toFixed(2)}×, client ${(median(safe.map((r) => r.clientUs)) / median(plain.map((r) => r.clientUs))).toFixed(2)}× (medians of ${ROUNDS} interleaved rounds)`,
);
if (flags.smoke) console.log('smoke size (CI keeps the script from rotting): these ratios are not measurements; run without --smoke');
console.log(`entries left: safe ${safeLeft} (the group still needs all of them), plain ${plainLeft} (trimmed regardless)`);
admin.disconnect();
await redis.stop();

/** The floor and Redis 8.6 (the only one with XACKDEL and ACKED): what each mode leaves of a stream. */
const NEWER = 'redis8-server';
await memorySection(flags.smoke ? 300 : 20_000, [...new Set([SERVER_BIN, NEWER])], log);
await inlineAckedCost(NEWER, LAG, flags.smoke ? 40 : 400, log);
if (flags.smoke) console.log('smoke size: the memory figures are not measurements either; run without --smoke');
