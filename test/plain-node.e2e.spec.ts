import { spawn, type ChildProcess } from 'node:child_process';
import { WORKER_START_MS, WORKER_TEST_MS } from './support/node-process.js';
import { repoRoot, requireBuilt } from './support/built.js';
import { pendingIds } from './support/pending.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

interface Worker {
  child: ChildProcess;
  /** Every JSON line the worker printed, in order. */
  events: Record<string, unknown>[];
  exited: Promise<number | null>;
  settled(id: string): Record<string, unknown>[];
}

const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) {
    if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
    await w.exited;
  }
});

/** test/fixtures/plain-node/worker.mjs: StreamConsumer under deny-nest.cjs (any @nestjs/* resolution fails it). */
async function startWorker(prefix: string, name: string, env: Record<string, string> = {}): Promise<Worker> {
  const fixtures = `${repoRoot}test/fixtures/plain-node/`;
  const child = spawn(process.execPath, ['--require', `${fixtures}deny-nest.cjs`, `${fixtures}worker.mjs`, redis.url, prefix, name], {
    cwd: repoRoot,
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_ENV: 'production', ...env },
  });
  const events: Record<string, unknown>[] = [];
  let err = '';
  let rest = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n');
    rest = lines.pop()!;
    for (const line of lines) events.push(JSON.parse(line) as Record<string, unknown>);
  });
  child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const worker: Worker = { child, events, exited, settled: (id) => events.filter((e) => e.id === id) };
  workers.push(worker);
  // A process start is CPU (imports, connections): beside CI's other lanes on 2 cores it took over 10 s
  // twice. The bound catches a worker that never starts, not a slow machine.
  await waitFor(() => events.some((e) => e.ready === name) || child.exitCode !== null, {
    message: `worker "${name}" to start`,
    timeoutMs: WORKER_START_MS,
  });
  expect(err, 'the worker failed to start').toBe('');
  expect(child.exitCode).toBeNull();
  return worker;
}

// Child processes given one URL: the one-node run covers it (Redis and, in the Valkey lane, Valkey).
describe.skipIf(CLUSTER_MODE)('a plain Node worker (nestjs-redis-streams/core and ioredis, no Nest)', { timeout: WORKER_TEST_MS }, () => {
  beforeAll(() => requireBuilt('libs/redis-streams/dist/esm/core/index.js'));

  it("reclaims a killed peer's entry after minIdleMs", async () => {
    const prefix = uniquePrefix();
    const dead = await startWorker(prefix, 'dead', { HANG: '1' });
    const id = (await redis.client().xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'hang' })))!;
    await waitFor(() => dead.events.some((e) => e.hanging === id), { message: 'the doomed worker to hold the entry' });
    dead.child.kill('SIGKILL');
    await dead.exited;
    expect(await pendingIds(redis, `${prefix}orders`, { consumer: 'dead' })).toEqual([id]);

    const alive = await startWorker(prefix, 'alive');
    await waitFor(() => alive.settled(id).length === 1, { message: "the peer to reclaim the dead worker's entry" });
    expect(alive.settled(id)).toEqual([expect.objectContaining({ outcome: 'acked', source: 'reclaim', deliveryCount: 2 })]);
    expect(await pendingIds(redis, `${prefix}orders`)).toEqual([]);
  });

  it('drains its own pending entries at once when it restarts under its name after a kill -9', async () => {
    const prefix = uniquePrefix();
    const first = await startWorker(prefix, 'w', { HANG: '1' });
    const id = (await redis.client().xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'hang' })))!;
    await waitFor(() => first.events.some((e) => e.hanging === id), { message: 'the worker to hold the entry' });
    first.child.kill('SIGKILL');
    await first.exited;

    const again = await startWorker(prefix, 'w');
    await waitFor(() => again.settled(id).length === 1, { message: 'the restarted worker to drain its own entry' });
    // Its own PEL, read back first (minIdleMs plays no part): the source says so.
    expect(again.settled(id)).toEqual([expect.objectContaining({ outcome: 'acked', source: 'drain' })]);
    expect(await pendingIds(redis, `${prefix}orders`)).toEqual([]);
  });

  it('retries a failing entry with a growing backoff until it succeeds, and dead-letters a DeadLetterError at once', async () => {
    const prefix = uniquePrefix();
    const worker = await startWorker(prefix, 'w');
    const r = redis.client();
    const flaky = (await r.xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'flaky' })))!;
    const poison = (await r.xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'poison' })))!;
    await waitFor(() => worker.settled(flaky).some((e) => e.outcome === 'acked'), {
      message: 'the flaky entry to succeed on its third try',
    });
    await waitFor(() => worker.settled(poison).length === 1, { message: 'the poison entry to be dead-lettered' });

    const tries = worker.settled(flaky);
    expect(tries.map((e) => [e.outcome, e.deliveryCount])).toEqual([
      ['failed', 1],
      ['failed', 2],
      ['acked', 3],
    ]);
    // Exponential: each wait longer than the one before.
    const waits = tries.slice(0, 2).map((e) => e.retryInMs as number);
    expect(waits[1]).toBeGreaterThan(waits[0]!);
    const [dead] = worker.settled(poison);
    expect(dead).toMatchObject({ outcome: 'dead-lettered', deliveryCount: 1 });
    const letters = await r.xrange(deadLetterKey(`${prefix}orders`), '-', '+');
    expect(letters.map(([id]) => id)).toEqual([dead!.deadLetterId]);
    expect(letters[0]![1].join(' ')).toMatch(/error handler refused it: poison: never retry/);
    expect(await pendingIds(redis, `${prefix}orders`)).toEqual([]);
  });

  it('SIGTERM wired to close(): the entry in hand finishes and is acked, nothing new is taken, and the process exits 0', async () => {
    const prefix = uniquePrefix();
    const worker = await startWorker(prefix, 'w');
    const r = redis.client();
    const slow = (await r.xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'slow' })))!;
    await waitFor(() => worker.events.some((e) => e.started === slow), { message: 'the slow handler to start' });
    worker.child.kill('SIGTERM');
    await waitFor(() => worker.events.some((e) => e.signal === 'SIGTERM'), { message: 'the worker to see SIGTERM' });
    const later = (await r.xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'ok' })))!;
    worker.child.stdin!.write('release\n');
    expect(await worker.exited).toBe(0);

    expect(worker.settled(slow)).toEqual([expect.objectContaining({ outcome: 'acked' })]);
    expect(worker.settled(later)).toEqual([]);
    expect(worker.events.at(-1)).toEqual({ closed: true });
    // The later entry is never delivered or handed back pending: never handled. The slow one is acked.
    expect((await pendingIds(redis, `${prefix}orders`)).filter((id) => id !== later)).toEqual([]);
  });

  it('a second SIGTERM (the AbortSignal) ends close() at once: the entry in hand is left pending for a peer', async () => {
    const prefix = uniquePrefix();
    const worker = await startWorker(prefix, 'w');
    const slow = (await redis.client().xadd(`${prefix}orders`, '*', 'data', JSON.stringify({ kind: 'slow' })))!;
    await waitFor(() => worker.events.some((e) => e.started === slow), { message: 'the slow handler to start' });
    worker.child.kill('SIGTERM');
    await waitFor(() => worker.events.some((e) => e.signal === 'SIGTERM'), { message: 'the worker to see SIGTERM' });
    worker.child.kill('SIGTERM');
    // shutdownTimeoutMs is 10 s and the handler never returns by itself: only the abort ends close().
    expect(await worker.exited).toBe(0);
    expect(worker.events.at(-1)).toEqual({ closed: true });
    expect(worker.settled(slow)).toEqual([]);
    expect(await pendingIds(redis, `${prefix}orders`, { consumer: 'w' })).toEqual([slow]);
  });
});
