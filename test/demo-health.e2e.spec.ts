import { connect } from 'node:net';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { requireBuilt } from './support/built.js';
import { freezeServer } from './support/freeze.js';
import { spawnNode, WORKER_START_MS, WORKER_TEST_MS, type NodeProcess } from './support/node-process.js';
import { freePort, startRedis, type TestRedis } from './support/redis-server.js';
import { waitFor } from './support/wait-for.js';

// The demo worker (apps/orders-worker) with HEALTH_PORT: a hybrid app answering /health/live,
// /health/ready and /metrics over real HTTP. Each test spawns the built worker.

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis({ standalone: true })));
afterAll(async () => redis?.stop());

type Worker = NodeProcess;

const workers: Worker[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) {
    if (w.proc.exitCode === null && w.proc.signalCode === null) w.proc.kill('SIGKILL');
    await w.exit;
  }
});

function startWorker(env: Record<string, string>): Worker {
  const main = requireBuilt('dist/apps/orders-worker/main.js');
  // Only this test's settings: no HEALTH_* or Redis location of the caller's.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(HEALTH_|REDIS_|STREAMS_|DEMO_)/.test(name)));
  const worker = spawnNode(main, [], { ...inherited, NO_COLOR: '1', DEMO_QUIET: '1', ...env });
  workers.push(worker);
  return worker;
}

/** A worker's keys and names, unique per test so tests never share a group. */
function names() {
  const group = `health-${randomUUID().slice(0, 8)}`;
  const prefix = `${group}:`;
  return {
    group,
    prefix,
    stream: `${prefix}orders`,
    env: { STREAMS_KEY_PREFIX: prefix, STREAMS_GROUP: group, STREAMS_CONSUMER: 'worker-1' },
  };
}

/** GET on the worker's listener: status, content type and body (parsed when JSON). */
async function get(port: number, path: string): Promise<{ status: number; type: string; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  const type = res.headers.get('content-type') ?? '';
  const text = await res.text();
  return { status: res.status, type, body: type.includes('json') ? JSON.parse(text) : text };
}

/** The transport's figures in a Terminus answer: under `info` when up, `error` when down. */
const figures = (body: any): any => body.details['orders-worker'];
const streamOf = (body: any, stream: string): any => figures(body).streams.find((s: { stream: string }) => s.stream === stream);

/** Orders as apps/orders-api writes them: field `data`, the order as JSON. Pipelined: one round trip. */
async function addOrders(r: Redis, stream: string, count: number, firstId = 1001): Promise<void> {
  const pipeline = r.pipeline();
  for (let i = 0; i < count; i++) {
    const id = firstId + i;
    pipeline.xadd(stream, '*', 'data', JSON.stringify({ order_id: String(id), customer_id: `customer-${id % 40}`, status: 'paid' }));
  }
  const results = (await pipeline.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
}

/** Waits for the worker's HTTP listener line and its consumer's start. */
async function started(worker: Worker, port: number): Promise<void> {
  await waitFor(() => worker.output().includes('Nest microservice successfully started') || worker.proc.exitCode !== null, {
    message: 'the worker to start',
    timeoutMs: WORKER_START_MS,
  });
  expect(worker.proc.exitCode, worker.output()).toBeNull();
  expect(worker.output()).toContain(
    `health http://127.0.0.1:${port}/health/live http://127.0.0.1:${port}/health/ready, metrics http://127.0.0.1:${port}/metrics, dashboard http://127.0.0.1:${port}/dashboard/`,
  );
}

/**
 * TCP ports a process listens on (Linux): its socket inodes (/proc/<pid>/fd) matched with the
 * LISTEN rows (state 0A) of /proc/<pid>/net/tcp and tcp6.
 */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports: number[] = [];
  for (const table of ['tcp', 'tcp6']) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue; // no IPv6
    }
    for (const row of text.trim().split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      if (cols[3] === '0A' && inodes.has(cols[9]!)) ports.push(parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return ports.sort((a, b) => a - b);
}

/** Polls HTTP at a calm pace: a failed Terminus check logs a line each time. */
const poll = { intervalMs: 100 };

describe('the demo worker with HEALTH_PORT (hybrid app: /health/live, /health/ready, /metrics)', { timeout: WORKER_TEST_MS }, () => {
  it('is live and ready while consuming, with the streams’ figures, and /metrics has the transport’s metrics', async () => {
    const { stream, env } = names();
    const port = await freePort();
    const worker = startWorker({ ...env, REDIS_URL: redis.url, HEALTH_PORT: String(port), DEMO_WORK_MS: '20' });
    await started(worker, port);

    const live = await get(port, '/health/live');
    expect(live.status).toBe(200);
    expect(live.type).toContain('application/json');
    expect(live.body.status).toBe('ok');
    expect(live.body.info['orders-worker']).toMatchObject({ status: 'up', state: 'running', consumer: 'worker-1', redisDownForMs: 0 });

    // 60 orders at 20 ms each: over a second of consuming, during which readiness answers 200.
    await addOrders(redis.client(), stream, 60);
    const readyStatuses = new Set<number>();
    const busy = await waitFor(
      async () => {
        const ready = await get(port, '/health/ready');
        readyStatuses.add(ready.status);
        return streamOf(ready.body, stream).inHand > 0 ? ready : undefined;
      },
      { ...poll, message: 'readiness while entries are in hand' },
    );
    expect([...readyStatuses]).toEqual([200]);
    expect(busy.body.info['orders-worker']).toMatchObject({ status: 'up', state: 'running' });
    expect(streamOf(busy.body, stream)).toMatchObject({
      stream,
      lag: expect.any(Number),
      pending: expect.any(Number),
      lastBeatAgeMs: expect.any(Number),
    });

    const drained = await waitFor(
      async () => {
        const ready = await get(port, '/health/ready');
        const s = streamOf(ready.body, stream);
        return ready.status === 200 && s.lag === 0 && s.pending === 0 && s.inHand === 0 ? ready : undefined;
      },
      { ...poll, timeoutMs: 20_000, message: 'readiness to show the stream drained' },
    );
    expect(figures(drained.body).statsAgeMs).toBeGreaterThanOrEqual(0);

    const on = `messaging_destination_name="${stream}"`;
    const ackedLine = (text: string) =>
      text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('messaging_redis_streams_consumed_messages_total{') &&
            l.includes(on) &&
            l.includes('messaging_redis_streams_outcome="acked"'),
        );
    // The counter is reported as each entry settles: poll until it has all 60.
    const scrape = await waitFor(
      async () => {
        const s = await get(port, '/metrics');
        return s.status === 200 && / 60$/.test(ackedLine(s.body) ?? '') ? s : undefined;
      },
      { ...poll, message: 'messaging_redis_streams_consumed_messages_total (acked) 60 in /metrics' },
    );
    expect(scrape.type).toContain('text/plain');
    expect(scrape.body).toMatch(new RegExp(`^messaging_redis_streams_lag\\{[^}]*${on}[^}]*\\} 0$`, 'm'));
    expect(scrape.body).toMatch(new RegExp(`^messaging_redis_streams_pending\\{[^}]*${on}[^}]*\\} 0$`, 'm'));
    expect(scrape.body).toMatch(new RegExp(`^messaging_redis_streams_process_duration_seconds_count\\{[^}]*${on}[^}]*\\} 60$`, 'm'));

    // The dashboard beside them (read-only): the stream, drained, in its overview; an action refused.
    const overview = await get(port, '/dashboard/api/overview');
    expect(overview.status).toBe(200);
    const shown = overview.body.streams.find((x: { stream: string }) => x.stream === stream);
    expect(shown.groups[0]).toMatchObject({ lag: 0, pending: 0 });
    const action = await fetch(`http://127.0.0.1:${port}/dashboard/api/dead-letters/delete`, { method: 'POST' });
    expect(action.status).toBe(403);
  });

  it('readiness turns 503 past HEALTH_REDIS_DOWN_MS once its Redis is killed, 200 again once Redis is back; liveness stays 200', async (ctx) => {
    // Its own redis-server, killed and started again on the same port.
    const own = await startRedis({ standalone: true });
    onTestFinished(() => own.stop());
    if (!own.owned) ctx.skip(); // REDIS_URL: a server the test may not kill
    const { stream, env } = names();
    const port = await freePort();
    const worker = startWorker({ ...env, REDIS_URL: own.url, HEALTH_PORT: String(port), HEALTH_REDIS_DOWN_MS: '1000', DEMO_QUIET: '0' });
    await started(worker, port);
    await addOrders(own.client(), stream, 1, 1001);
    await waitFor(() => worker.output().includes('order 1001 (paid)'), { message: 'an order handled' });
    expect((await get(port, '/health/ready')).status).toBe(200);

    await own.kill();
    let revived = false;
    onTestFinished(async () => void (revived || (await own.revive())));
    const down = await waitFor(
      async () => {
        const ready = await get(port, '/health/ready');
        return ready.status === 503 ? ready : undefined;
      },
      { ...poll, timeoutMs: 15_000, message: 'readiness 503' },
    );
    expect(down.type).toContain('application/json');
    expect(down.body.status).toBe('error');
    expect(down.body.error['orders-worker'].status).toBe('down');
    // Not before the threshold, as the worker measured the outage.
    expect(down.body.error['orders-worker'].reasons).toEqual([
      expect.stringMatching(/^Redis unreachable for \d+ ms \(threshold 1000 ms\)$/),
    ]);
    expect(figures(down.body).redisDownForMs).toBeGreaterThan(1000);
    // A restart cannot bring Redis back: liveness stays 200, the outage in its figures.
    const live = await get(port, '/health/live');
    expect(live.status).toBe(200);
    expect(figures(live.body).redisDownForMs).toBeGreaterThan(1000);
    // /metrics still answers while Redis is down.
    expect((await get(port, '/metrics')).status).toBe(200);
    expect(worker.proc.exitCode).toBeNull();

    await own.revive();
    revived = true;
    const up = await waitFor(
      async () => {
        const ready = await get(port, '/health/ready');
        return ready.status === 200 ? ready : undefined;
      },
      { ...poll, timeoutMs: 15_000, message: 'readiness 200 again' },
    );
    expect(figures(up.body).redisDownForMs).toBe(0);
    // Consuming again (the group re-created on the new, empty server).
    await addOrders(own.client(), stream, 1, 2001);
    await waitFor(() => worker.output().includes('order 2001 (paid)'), { timeoutMs: 15_000, message: 'an order handled after the outage' });
  });

  it('with HEALTH_MAX_LAG and HEALTH_MAX_PENDING set too: still ready well inside HEALTH_REDIS_DOWN_MS of a frozen, then a killed Redis, 503 only past it, 200 once it answers', async (ctx) => {
    // Issue 48: readiness went 503 338 ms into an outage with HEALTH_REDIS_DOWN_MS=2000: the figures it could not
    // read counted at once ("lag and pending unknown: Redis unreachable"), where the outage is redisDownMs' to judge.
    const own = await startRedis({ standalone: true });
    onTestFinished(() => own.stop());
    if (!own.owned) ctx.skip(); // REDIS_URL: a server the test may not stop
    const { stream, env } = names();
    const port = await freePort();
    const downMs = 4000;
    const worker = startWorker({
      ...env,
      REDIS_URL: own.url,
      HEALTH_PORT: String(port),
      HEALTH_REDIS_DOWN_MS: String(downMs),
      HEALTH_MAX_LAG: '1000000',
      HEALTH_MAX_PENDING: '1000000',
      DEMO_QUIET: '0',
    });
    await started(worker, port);
    await addOrders(own.client(), stream, 1, 1001);
    await waitFor(() => worker.output().includes('order 1001 (paid)'), { message: 'an order handled' });

    type Answer = Awaited<ReturnType<typeof get>> & { sentAt: number; at: number };
    const ask = async (): Promise<Answer> => {
      const sentAt = Date.now();
      const answer = await get(port, '/health/ready');
      return { ...answer, sentAt, at: Date.now() };
    };
    const outages: [string, () => Promise<() => Promise<void>>][] = [
      [
        'frozen',
        async () => {
          const thaw = await freezeServer(own.client());
          onTestFinished(thaw);
          return async () => thaw();
        },
      ],
      [
        'killed',
        async () => {
          await own.kill('SIGKILL');
          let revived = false;
          onTestFinished(async () => void (revived || (await own.revive())));
          return async () => {
            await own.revive();
            revived = true;
          };
        },
      ],
    ];
    for (const [outage, stop] of outages) {
      await waitFor(async () => (await ask()).status === 200, { ...poll, message: `ready before Redis is ${outage}` });
      // The moment Redis stopped answering, as a client of its own saw it: its last answer came before this.
      const probe = own.newClient();
      await probe.ping();
      const answeredAt = Date.now();
      probe.disconnect();
      const restore = await stop();
      const answers: Answer[] = [];
      // Polled until the worker says Redis is down, then until 1.5 s of the outage have passed: ready all along.
      const noticed = await waitFor(
        async () => {
          const answer = await ask();
          answers.push(answer);
          if (answer.status !== 200) return answer;
          return figures(answer.body).redisDownForMs > 0 && answer.at - answeredAt >= 1500 && answer;
        },
        { ...poll, timeoutMs: 20_000, message: `readiness while Redis is ${outage}, past 1.5 s of it` },
      );
      expect([outage, noticed.status, noticed.status === 200 ? [] : figures(noticed.body).reasons]).toEqual([outage, 200, []]);
      const seen = answers.find((a) => figures(a.body).redisDownForMs > 0)!;
      expect(figures(seen.body).redisDownForMs).toBeLessThan(downMs);
      // Then not ready, for the outage alone, once it lasted longer than HEALTH_REDIS_DOWN_MS.
      const down = await waitFor(
        async () => {
          const answer = await ask();
          answers.push(answer);
          return answer.status === 503 && answer;
        },
        { ...poll, timeoutMs: 20_000, message: `readiness 503 while Redis is ${outage}` },
      );
      expect([outage, figures(down.body).reasons]).toEqual([
        outage,
        [expect.stringMatching(new RegExp(`^Redis unreachable for \\d+ ms \\(threshold ${downMs} ms\\)$`))],
      ]);
      expect(figures(down.body).redisDownForMs).toBeGreaterThan(downMs);
      // No answer said 503 before: none came before HEALTH_REDIS_DOWN_MS had passed since the last answer Redis gave.
      expect(answers.filter((a) => a.status !== 200 && a.at - answeredAt < downMs)).toEqual([]);
      await restore();
      const up = await waitFor(
        async () => {
          const answer = await ask();
          return answer.status === 200 && answer;
        },
        { ...poll, timeoutMs: 15_000, message: `readiness 200 once Redis (${outage}) answers again` },
      );
      expect(figures(up.body).redisDownForMs).toBe(0);
    }
  });

  it('readiness turns 503 while a stream’s lag is above HEALTH_MAX_LAG and 200 once drained; liveness stays 200', async () => {
    const { stream, env } = names();
    const port = await freePort();
    const worker = startWorker({
      ...env,
      REDIS_URL: redis.url,
      HEALTH_PORT: String(port),
      HEALTH_MAX_LAG: '20',
      HEALTH_MAX_PENDING: '1000',
      DEMO_WORK_MS: '10',
    });
    await started(worker, port);
    expect((await get(port, '/health/ready')).status).toBe(200);

    const liveStatuses = new Set<number>();
    const checkLive = async () => liveStatuses.add((await get(port, '/health/live')).status);
    await addOrders(redis.client(), stream, 200);
    const down = await waitFor(
      async () => {
        await checkLive();
        const ready = await get(port, '/health/ready');
        return ready.status === 503 ? ready : undefined;
      },
      { ...poll, message: 'readiness 503 on the backlog' },
    );
    expect(down.body.status).toBe('error');
    const reasons: string[] = down.body.error['orders-worker'].reasons;
    expect(reasons.length).toBeGreaterThan(0);
    for (const reason of reasons) expect(reason).toMatch(new RegExp(`^stream "${stream}": lag \\d+ above 20$`));
    expect(streamOf(down.body, stream).lag).toBeGreaterThan(20);

    const up = await waitFor(
      async () => {
        await checkLive();
        const ready = await get(port, '/health/ready');
        return ready.status === 200 ? ready : undefined;
      },
      { ...poll, timeoutMs: 20_000, message: 'readiness 200 once drained' },
    );
    expect(streamOf(up.body, stream).lag).toBeLessThanOrEqual(20);
    await checkLive();
    expect([...liveStatuses]).toEqual([200]);
    // Drained to the end, and ready still.
    await waitFor(
      async () => {
        const ready = await get(port, '/health/ready');
        const s = streamOf(ready.body, stream);
        return ready.status === 200 && s.lag === 0 && s.pending === 0;
      },
      { ...poll, timeoutMs: 20_000, message: 'the backlog drained' },
    );
  });

  it('answers while the consumer is still starting: live 200, ready 503 "starting", then ready 200 once it started', async (ctx) => {
    const own = await startRedis({ standalone: true });
    onTestFinished(() => own.stop());
    if (!own.owned) ctx.skip(); // REDIS_URL: a server the test may not kill
    // Redis is not there yet: the consumer keeps trying to start (STREAMS_STARTUP_TIMEOUT_MS).
    await own.kill();
    let revived = false;
    onTestFinished(async () => void (revived || (await own.revive())));
    const { env } = names();
    const port = await freePort();
    const worker = startWorker({
      ...env,
      REDIS_URL: own.url,
      HEALTH_PORT: String(port),
      STREAMS_STARTUP_TIMEOUT_MS: '60000',
      HEALTH_REDIS_DOWN_MS: '60000',
    });
    // A worker process's start: WORKER_START_MS, as for every other start here (10 s was missed once under load).
    const ready = await waitFor(() => get(port, '/health/ready').catch(() => undefined), {
      ...poll,
      timeoutMs: WORKER_START_MS,
      message: 'the listener while starting',
    });
    expect(ready.status).toBe(503);
    expect(ready.body.error['orders-worker']).toMatchObject({
      state: 'starting',
      reasons: expect.arrayContaining(['the consumer is starting']),
    });
    const live = await get(port, '/health/live');
    expect(live.status).toBe(200);
    expect(figures(live.body).state).toBe('starting');

    await own.revive();
    revived = true;
    await started(worker, port);
    await waitFor(async () => (await get(port, '/health/ready')).status === 200, {
      ...poll,
      timeoutMs: 15_000,
      message: 'readiness 200 once started',
    });
  });

  it('exits 0 on SIGTERM while the consumer is still starting (hybrid app)', async () => {
    const port = await freePort();
    const worker = startWorker({ REDIS_URL: 'redis://127.0.0.1:1', HEALTH_PORT: String(port), STREAMS_STARTUP_TIMEOUT_MS: '60000' });
    // Under way: the listener answers and the connection has failed at least once.
    await waitFor(() => /ECONNREFUSED/.test(worker.output()), { message: 'the start to be under way', timeoutMs: WORKER_START_MS });
    expect((await get(port, '/health/ready')).status).toBe(503);
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
  });

  it('on SIGTERM finishes the order in hand, acks it and exits 0 (hybrid app)', async () => {
    const { group, stream, env } = names();
    const port = await freePort();
    const worker = startWorker({
      ...env,
      REDIS_URL: redis.url,
      HEALTH_PORT: String(port),
      STREAMS_BLOCK_MS: '30000',
      DEMO_WORK_MS: '300',
      DEMO_QUIET: '0',
    });
    await started(worker, port);
    const r = redis.client();
    await addOrders(r, stream, 1, 1001);
    await waitFor(
      async () => {
        const pending = (await r.xpending(stream, group, '-', '+', 10)) as [string][];
        return pending.length === 1;
      },
      { message: 'the order in hand' },
    );
    worker.proc.kill('SIGTERM');
    expect(await worker.exit).toBe(0);
    expect(worker.output()).toContain('order 1001 (paid)');
    expect(((await r.xpending(stream, group)) as [number])[0]).toBe(0);
    // The listener closed with the app.
    await expect(fetch(`http://127.0.0.1:${port}/health/live`)).rejects.toThrow();
  });

  it('SIGTERM with a half-sent HTTP request open: the worker still stops at once, taking no new orders', async () => {
    const { group, stream, env } = names();
    const port = await freePort();
    const worker = startWorker({ ...env, REDIS_URL: redis.url, HEALTH_PORT: String(port), STREAMS_BLOCK_MS: '200' });
    await started(worker, port);
    // A probe (or anyone) that sent part of a request and waits: the HTTP server must not wait for it.
    const socket = connect(port, '127.0.0.1');
    await new Promise<void>((resolve) => socket.once('connect', resolve));
    socket.write('GET /health/live HTTP/1.1\r\nHost: x\r\n');
    socket.on('error', () => {});
    onTestFinished(() => void socket.destroy());
    // The defect this stands for waits for Node's headersTimeout (60 s) or for ever: half of it is the bound.
    worker.proc.kill('SIGTERM');
    await waitFor(() => worker.proc.exitCode !== null, { timeoutMs: 30_000, message: 'the worker to exit despite the open request' });
    expect(await worker.exit).toBe(0);
    const r = redis.client();
    await addOrders(r, stream, 1, 1001);
    expect(((await r.xpending(stream, group)) as [number])[0]).toBe(0);
  });

  it.skipIf(process.platform !== 'linux')('without HEALTH_PORT opens no port; with it, only HEALTH_PORT on loopback', async () => {
    const { stream, env } = names();
    const worker = startWorker({ ...env, REDIS_URL: redis.url, DEMO_QUIET: '0' });
    await waitFor(() => worker.output().includes('Nest microservice successfully started'), {
      message: 'the worker to start',
      timeoutMs: WORKER_START_MS,
    });
    await addOrders(redis.client(), stream, 1, 1001);
    await waitFor(() => worker.output().includes('order 1001 (paid)'), { message: 'an order handled' });
    expect(listeningPorts(worker.proc.pid!)).toEqual([]);
    expect(worker.output()).not.toMatch(/health http|Nest application successfully started/);

    // The same check finds the listener of a worker that has one (so the empty list above means something).
    const port = await freePort();
    const withHealth = startWorker({ ...names().env, REDIS_URL: redis.url, HEALTH_PORT: String(port) });
    await started(withHealth, port);
    expect(listeningPorts(withHealth.proc.pid!)).toEqual([port]);
    const row = readFileSync(`/proc/${withHealth.proc.pid}/net/tcp`, 'utf8')
      .split('\n')
      .find((l) => l.includes(`:${port.toString(16).toUpperCase().padStart(4, '0')} `) && l.trim().split(/\s+/)[3] === '0A');
    // Bound to 127.0.0.1 (0100007F), not every interface.
    expect(row?.trim().split(/\s+/)[1]).toBe(`0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`);
  });

  it('refuses a bad HEALTH_* setting with a message naming it', async () => {
    const badPort = startWorker({ REDIS_URL: redis.url, HEALTH_PORT: '70000' });
    expect(await badPort.exit).toBe(1);
    expect(badPort.output()).toContain('HEALTH_PORT must be an integer from 1 to 65535, got "70000"');
    // Checked even without HEALTH_PORT: a typo is never silent.
    const badLag = startWorker({ REDIS_URL: redis.url, HEALTH_MAX_LAG: 'many' });
    expect(await badLag.exit).toBe(1);
    expect(badLag.output()).toContain('HEALTH_MAX_LAG must be a whole number (0 or more), got "many"');
  });
});
