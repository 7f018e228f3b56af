import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { requireBuilt } from './support/built.js';
import { spawnNode, WORKER_START_MS, WORKER_TEST_MS, type NodeProcess } from './support/node-process.js';
import { pendingCount, pendingIds } from './support/pending.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});

function startWorker(env: Record<string, string>): NodeProcess {
  const worker = spawnNode(requireBuilt('dist/apps/orders-worker/main.js'), [], { ...process.env, NO_COLOR: '1', ...env });
  children.push(worker.proc);
  return worker;
}

/** A group and key prefix of the test's own (`demo-<id>`, `demo-<id>:`) and its orders stream. */
function demoNames(): { group: string; prefix: string; stream: string } {
  const group = `demo-${randomUUID().slice(0, 8)}`;
  return { group, prefix: `${group}:`, stream: `${group}:orders` };
}

/** The demo worker `worker-1` on the test's server and `names`, `env` over that, once its consumer has started. */
async function startDemoWorker(names: { group: string; prefix: string }, env: Record<string, string>): Promise<NodeProcess> {
  const worker = startWorker({
    REDIS_URL: redis.url,
    STREAMS_KEY_PREFIX: names.prefix,
    STREAMS_GROUP: names.group,
    STREAMS_CONSUMER: 'worker-1',
    ...env,
  });
  // The start is mostly CPU and has its own bound; what the test waits for next starts once it is up.
  await waitFor(() => worker.output().includes('Nest microservice successfully started'), {
    message: 'the worker to start',
    timeoutMs: WORKER_START_MS,
  });
  return worker;
}

/** `n` entries in `stream`, entry `i` of fields `fieldsOf(i)`, in one round trip: their ids. */
async function addEntries(stream: string, n: number, fieldsOf: (i: number) => string[]): Promise<string[]> {
  const pipeline = redis.client().pipeline();
  for (let i = 0; i < n; i++) pipeline.xadd(stream, '*', ...fieldsOf(i));
  return (await pipeline.exec())!.map(([, id]) => id as string);
}

/** Waits until `worker` logged every one of `ids` as handled and the group holds nothing pending. */
const allHandledAndAcked = (worker: NodeProcess, stream: string, group: string, ids: string[]) =>
  waitFor(async () => ids.every((id) => worker.output().includes(`entry ${id} `)) && (await pendingCount(redis, stream, group)) === 0, {
    message: 'every order handled and acked',
  });

describe('the demo worker (apps/orders-worker)', { timeout: WORKER_TEST_MS }, () => {
  it('handles redis-cli orders, and on SIGTERM finishes the order in hand, acks it and exits 0', async () => {
    const names = demoNames();
    const { group, stream } = names;
    const r = redis.client();
    const worker = await startDemoWorker(names, { STREAMS_BLOCK_MS: '30000', DEMO_WORK_MS: '300' });
    const first = await r.xadd(stream, '*', 'order_id', '1001', 'status', 'pending');
    await waitFor(() => worker.output().includes(`entry ${first}`), { message: 'the first order to be logged' });
    const second = await r.xadd(stream, '*', 'order_id', '1002', 'status', 'paid');
    // SIGTERM once the second order is in hand (its 300 ms of work has begun).
    await waitFor(async () => (await pendingIds(redis, stream, { group })).join() === second, { message: 'the second order in hand' });
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
    expect(worker.output()).toContain(`entry ${second}`);
    expect(await pendingCount(redis, stream, group)).toBe(0);
  });

  it('DEMO_BATCH_MAX=n: orders go to a batch handler of at most n, the same log line per order; a simulated failure fails only its order', async () => {
    const names = demoNames();
    const { group, stream } = names;
    const ids = await addEntries(stream, 25, (i) => ['order_id', String(2000 + i), 'status', 'pending']);
    const worker = await startDemoWorker(names, {
      STREAMS_BLOCK_MS: '100',
      STREAMS_MIN_IDLE_MS: '300',
      DEMO_BATCH_MAX: '10',
      DEMO_FAIL_RATE: '0.2',
      DEMO_SEED: '7',
    });
    // Every order logged once it succeeded (failed ones come back through reclaim until they do).
    await allHandledAndAcked(worker, stream, group, ids);
    expect(worker.output()).toMatch(/batch handler for "orders" failed on \d+ of \d+ entries/);
    expect(worker.output()).toMatch(/simulated failure of order \d+/);
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
  });

  it("DEMO_ORDERED=1: each customer's orders handled one at a time, in order, the handled line naming customer and entry", async () => {
    const names = demoNames();
    const { group, stream } = names;
    // What apps/orders-api writes: the customer is the entry's partitionKey field.
    const ids = await addEntries(stream, 60, (i) => [
      'data',
      JSON.stringify({ order_id: String(3000 + i), status: 'pending', customer_id: `c${i % 3}` }),
      'partitionKey',
      `c${i % 3}`,
    ]);
    const worker = await startDemoWorker(names, {
      STREAMS_BLOCK_MS: '100',
      STREAMS_CONCURRENCY: '8',
      DEMO_ORDERED: '1',
      DEMO_WORK_MS: '2',
      DEMO_WORK_JITTER_MS: '5',
    });
    await allHandledAndAcked(worker, stream, group, ids);
    // Per customer, the handled lines come in entry order.
    for (const customer of ['c0', 'c1', 'c2']) {
      const seen = [...worker.output().matchAll(new RegExp(`customer ${customer} entry (\\d+-\\d+) `, 'g'))].map((m) => m[1]);
      expect(seen).toEqual(ids.filter((_, i) => `c${i % 3}` === customer));
    }
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
  });

  it('STREAMS_RETRY=exponential:200, DEMO_FAIL_FIRST=2: an XADDed order fails on deliveries 1 and 2, next tries 200 then 400 ms away, handled on delivery 3', async () => {
    const names = demoNames();
    const { group, stream } = names;
    const r = redis.client();
    const worker = await startDemoWorker(names, { STREAMS_BLOCK_MS: '30000', STREAMS_RETRY: 'exponential:200', DEMO_FAIL_FIRST: '2' });
    const id = await r.xadd(stream, '*', 'order_id', '3001', 'status', 'pending');
    await waitFor(() => worker.output().includes(`entry ${id} delivery 3`), { message: 'the order handled on its third delivery' });
    // The library's failure lines (delivery n of maxDeliveries, the handler's error, the next try), then the order's own line.
    const lines = worker.output().split('\n');
    const failures = lines.filter((line) => line.includes(`failed on entry ${id}`));
    expect(failures).toHaveLength(2);
    expect(failures[0]).toMatch(
      /\(delivery 1 of \d+\): .*simulated failure of order 3001 on delivery 1 \(DEMO_FAIL_FIRST=2\); left pending, next try in 200 ms$/,
    );
    expect(failures[1]).toMatch(
      /\(delivery 2 of \d+\): .*simulated failure of order 3001 on delivery 2 \(DEMO_FAIL_FIRST=2\); left pending, next try in 400 ms$/,
    );
    const handled = lines.findIndex((line) => line.includes(`entry ${id} delivery 3`));
    expect(lines.indexOf(failures[1]!)).toBeLessThan(handled);
    expect(lines.filter((line) => line.includes(`entry ${id} delivery`))).toHaveLength(1);
    // Same entry throughout: acked (the ack follows the handler's line), nothing waits for a retry, no copy was added.
    await waitFor(async () => (await pendingCount(redis, stream, group)) === 0, { message: 'the ack of its third delivery' });
    expect(await r.xlen(stream)).toBe(1);
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
  });

  it('refuses a bad setting with a message naming it', async () => {
    const worker = startWorker({ REDIS_URL: redis.url, STREAMS_BATCH: 'lots' });
    expect(await worker.exit).toBe(1);
    expect(worker.output()).toContain('STREAMS_BATCH must be an integer');
  });

  it('refuses a malformed STREAMS_RETRY or DEMO_FAIL_FIRST, naming it and the value', async () => {
    const retry = startWorker({ REDIS_URL: redis.url, STREAMS_RETRY: 'exponential:200:100' });
    const failFirst = startWorker({ REDIS_URL: redis.url, DEMO_FAIL_FIRST: '-1' });
    expect(await retry.exit).toBe(1);
    expect(retry.output()).toContain('STREAMS_RETRY must be fixed:<ms> or exponential:<ms>[:<maxMs>]');
    expect(retry.output()).toContain('got "exponential:200:100"');
    expect(await failFirst.exit).toBe(1);
    expect(failFirst.output()).toContain('DEMO_FAIL_FIRST must be a whole number (0 or more), got "-1"');
  });

  it('exits 1 with the URL and the cause when Redis is unreachable at start', async () => {
    // The cause is named once a first connection was refused: 500 ms was too short for that on a busy
    // machine (the new process had not got its ECONNREFUSED yet: "unreachable: no answer").
    const worker = startWorker({ REDIS_URL: 'redis://:hunter2@127.0.0.1:1', STREAMS_STARTUP_TIMEOUT_MS: '5000' });
    expect(await worker.exit).toBe(1);
    expect(worker.output()).toMatch(/could not start within 5000 ms: redis:\/\/:\*\*\*@127\.0\.0\.1:1 .*ECONNREFUSED/);
    expect(worker.output()).not.toContain('hunter2');
  });

  it('exits 0 on SIGTERM while still starting (nothing was in hand)', async () => {
    const worker = startWorker({ REDIS_URL: 'redis://127.0.0.1:1', STREAMS_STARTUP_TIMEOUT_MS: '60000' });
    // Under way: the connection has failed at least once and is being retried.
    await waitFor(() => /ECONNREFUSED/.test(worker.output()), { message: 'the start to be under way', timeoutMs: WORKER_START_MS });
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
    expect(worker.output()).toContain('stopped before the consumer started');
  });
});
