// The memory section of `npm run bench:retention`: MEMORY USAGE and XLEN of one stream after ENTRIES entries
// were produced and consumed at a steady rate, under each retention mode, on Redis 7.0 and Redis 8.6 side by side
// (each server with the modes it has). Two scenes: every entry succeeds; one early entry fails and waits for a
// retry an hour away (pending all along, as a slow retry or a poison entry before maxDeliveries is). Figures are
// bytes and ratios against "no retention" on the same server and scene, measured in the same run.
import { Redis } from 'ioredis';
import { lastValueFrom } from 'rxjs';
import { RedisStreamsClient, type RetentionPolicy } from 'nestjs-redis-streams';
import { StreamConsumer, type RedisStreamsServerOptions } from 'nestjs-redis-streams/core';
import { MissingBinaryError, startRedisServer, type RedisServerProcess } from '../scripts/lib/redis-server.mjs';
import { waitFor } from '../test/support/wait-for.js';

const MAX_LEN = 1_000;
/** The producer writes this many at once (pipelined), then waits for the consumer to catch up: a steady rate the consumer keeps. */
const WAVE = 100;

interface Mode {
  name: string;
  retention?: RetentionPolicy;
  deleteOnAck?: RedisStreamsServerOptions['deleteOnAck'];
}

const MODES: Mode[] = [
  { name: 'no retention' },
  { name: `producer MAXLEN ~ ${MAX_LEN}`, retention: { maxLen: MAX_LEN } },
  { name: `producer safe maxLen ${MAX_LEN}`, retention: { maxLen: MAX_LEN, safe: true } },
  { name: "consumer deleteOnAck 'this-group'", deleteOnAck: 'this-group' },
];

interface Figure {
  bytes: number;
  length: number;
  /** The entry waiting for its retry was trimmed away (lost), in the scene where one waits. */
  lost: boolean;
}

/** One mode on one server: ENTRIES emitted in waves, each consumed before the next; the stream measured after the last. */
async function run(url: string, admin: Redis, mode: Mode, scene: 'all succeed' | 'one waits', entries: number): Promise<Figure | string> {
  const prefix = `mem-${Math.random().toString(36).slice(2, 8)}:`;
  const key = `${prefix}orders`;
  const consumer = new StreamConsumer({
    connection: url,
    keyPrefix: prefix,
    group: 'g',
    consumer: 'c',
    batchSize: WAVE,
    blockMs: 100,
    logger: false,
    telemetry: false,
    retry: { backoff: { type: 'fixed', delayMs: 3_600_000 } },
    ...(mode.deleteOnAck ? { deleteOnAck: mode.deleteOnAck } : {}),
  });
  let handled = 0;
  let waiting: string | undefined;
  consumer.handle('orders', (payload: { i: number }, ctx) => {
    handled++;
    if (scene !== 'one waits' || payload.i !== 10) return;
    waiting = ctx.getId();
    throw new Error('waits an hour for its retry');
  });
  try {
    await consumer.start();
  } catch (err) {
    await consumer.close();
    return (err as Error).message.includes('needs XACKDEL') ? 'needs XACKDEL' : `failed: ${(err as Error).message}`;
  }
  const client = new RedisStreamsClient({
    connection: url,
    keyPrefix: prefix,
    telemetry: false,
    ...(mode.retention ? { retention: mode.retention } : {}),
  });
  await client.connect();
  const body = 'x'.repeat(200);
  try {
    for (let i = 0; i < entries; i += WAVE) {
      const wave: Promise<unknown>[] = [];
      for (let j = i; j < Math.min(entries, i + WAVE); j++) wave.push(lastValueFrom(client.emit('orders', { i: j, body })));
      await Promise.all(wave);
      const upTo = Math.min(entries, i + WAVE);
      await waitFor(() => handled >= upTo, { message: `${upTo} entries handled`, intervalMs: 5 });
    }
    // The last acks confirmed: nothing pending but the entry waiting for its retry (unless a blind trim deleted it).
    const pendingLeft = scene === 'one waits' ? 1 : 0;
    await waitFor(async () => Number(((await admin.xpending(key, 'g')) as unknown[])[0]) <= pendingLeft, { message: 'the acks' });
    const lost = waiting !== undefined && (await admin.xrange(key, waiting, waiting)).length === 0;
    return { bytes: Number(await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')), length: await admin.xlen(key), lost };
  } finally {
    await client.close();
    await consumer.close();
    await admin.del(key);
  }
}

/** The server's name (`Redis 8.6.3`), from INFO. */
async function serverName(admin: Redis): Promise<string> {
  const info = await admin.info('server');
  const valkey = /valkey_version:(\S+)/.exec(info)?.[1];
  return valkey ? `Valkey ${valkey}` : `Redis ${/redis_version:(\S+)/.exec(info)?.[1] ?? '?'}`;
}

const size = (bytes: number) => (bytes < 10_240 ? `${bytes} B` : `${(bytes / 1024).toFixed(0)} KB`);

/**
 * Prints one table per scene: a row per mode, a column per server (bytes, XLEN, ratio to "no retention"
 * there). A binary that is not installed is named and left out.
 */
export async function memorySection(entries: number, binaries: readonly string[], log: (line: string) => void): Promise<void> {
  const columns: { name: string; figures: Map<string, Figure | string> }[] = [];
  for (const bin of binaries) {
    let server: RedisServerProcess;
    try {
      server = await startRedisServer({ bin });
    } catch (err) {
      if (!(err instanceof MissingBinaryError)) throw err;
      log(`${bin} is not installed: its column is left out (scripts/newer-servers.sh installs redis8-server)`);
      continue;
    }
    const admin = new Redis(server.url);
    try {
      const name = await serverName(admin);
      log(`${name}: ${MODES.length} modes × 2 scenes, ${entries} entries each`);
      const figures = new Map<string, Figure | string>();
      for (const scene of ['all succeed', 'one waits'] as const)
        for (const mode of MODES) figures.set(`${scene}|${mode.name}`, await run(server.url, admin, mode, scene, entries));
      columns.push({ name, figures });
    } finally {
      admin.disconnect();
      await server.stop();
    }
  }
  for (const scene of ['all succeed', 'one waits'] as const) {
    console.log(
      `\nmemory of the stream after ${entries} entries of ~250 bytes produced and consumed (${scene === 'all succeed' ? 'every entry succeeds' : 'entry 10 fails and waits an hour for its retry'}):`,
    );
    console.log(`${'mode'.padEnd(36)}${columns.map((c) => c.name.padEnd(48)).join('')}`);
    for (const mode of MODES) {
      const cells = columns.map(({ figures }) => {
        const figure = figures.get(`${scene}|${mode.name}`)!;
        const reference = figures.get(`${scene}|${MODES[0]!.name}`);
        if (typeof figure === 'string') return `— (${figure})`.padEnd(48);
        const ratio = typeof reference === 'string' || !reference ? '' : ` ${(figure.bytes / reference.bytes).toPrecision(2)}×`;
        return `${size(figure.bytes)}, XLEN ${figure.length}${ratio}${figure.lost ? ', waiting entry LOST' : ''}`.padEnd(48);
      });
      console.log(`${mode.name.padEnd(36)}${cells.join('')}`);
    }
  }
}

/** Server µs per call of `command` since the last RESETSTAT. */
async function usecPerCall(admin: Redis, command: string): Promise<number> {
  const m = new RegExp(`cmdstat_${command}:calls=(\\d+),usec=(\\d+)`).exec(await admin.info('commandstats'));
  return m ? Number(m[2]) / Number(m[1]) : 0;
}

/**
 * Why the safe trim stays a script on Redis 8.6 rather than `XADD … MAXLEN ~ n ACKED` on every write: with a
 * group `lag` entries behind, each such XADD examines every entry over the bound the group still needs. Server
 * µs per write of a plain `MAXLEN ~` XADD (the reference), the inline ACKED one, and the client's safe emit
 * (the script with ACKED on one write in 20), on `bin`.
 */
export async function inlineAckedCost(bin: string, lag: number, writes: number, log: (line: string) => void): Promise<void> {
  let server: RedisServerProcess;
  try {
    server = await startRedisServer({ bin });
  } catch (err) {
    if (!(err instanceof MissingBinaryError)) throw err;
    log(`${bin} is not installed: the inline ACKED cost is left out`);
    return;
  }
  const admin = new Redis(server.url);
  try {
    const lagging = async (key: string) => {
      await admin.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
      for (let done = 0; done < lag; done += 5_000) {
        const pipeline = admin.pipeline();
        for (let i = done; i < Math.min(lag, done + 5_000); i++) pipeline.xadd(key, '*', 'data', JSON.stringify({ i }));
        await pipeline.exec();
      }
    };
    const perWrite = async (key: string, write: () => Promise<unknown>) => {
      await lagging(key);
      await write(); // the script loaded, the connection open
      await admin.config('RESETSTAT');
      for (let i = 0; i < writes; i++) await write();
      return ((await usecPerCall(admin, 'xadd')) * writes + (await usecPerCall(admin, 'evalsha')) * (writes / 20)) / writes;
    };
    const plain = await perWrite('plain', () => admin.xadd('plain', 'MAXLEN', '~', MAX_LEN, '*', 'data', '{}'));
    const inline = await perWrite('inline', () => admin.call('XADD', 'inline', 'MAXLEN', '~', MAX_LEN, 'ACKED', '*', 'data', '{}'));
    const client = new RedisStreamsClient({ connection: server.url, telemetry: false, retention: { maxLen: MAX_LEN, safe: true } });
    await client.connect();
    const script = await perWrite('script', () => lastValueFrom(client.emit('script', {})));
    await client.close();
    const name = await serverName(admin);
    console.log(`\n${name}, a group ${lag} entries behind, maxLen ${MAX_LEN}: server µs per write (${writes} writes each)`);
    console.log(`  plain XADD MAXLEN ~ (reference)           ${plain.toFixed(1).padStart(9)}`);
    console.log(
      `  XADD MAXLEN ~ ACKED on every write        ${inline.toFixed(1).padStart(9)}   ${(inline / plain).toFixed(0)}× (not used)`,
    );
    console.log(
      `  safe emit: the trim script, ACKED in it   ${script.toFixed(1).padStart(9)}   ${(script / plain).toFixed(1)}× (what safe: true does)`,
    );
  } finally {
    admin.disconnect();
    await server.stop();
  }
}
