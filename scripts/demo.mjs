#!/usr/bin/env node
// One-command demo: a throwaway redis-server (unless REDIS_URL is set), the built orders
// worker (apps/orders-worker) and the producer (apps/orders-api). Ctrl-C stops it all.
//
//   npm run demo                     feed 300 orders, keep running until Ctrl-C
//   npm run demo -- --orders 1000    feed more
//   npm run demo -- --once           exit 0 once every order is acked (used by the tests)
//   npm run demo -- --cluster        on a throwaway local Redis Cluster (6 nodes, scripts/local-cluster.mjs)
//
// REDIS_CLUSTER_URLS (comma-separated node URLs) runs it on that cluster instead, --cluster or not;
// STREAMS_PARTITIONS=n makes the `orders` stream n partitions (worker and producer alike).
// The worker answers /health/live, /health/ready and /metrics on HEALTH_PORT (a free loopback
// port unless set; HEALTH_HOST, HEALTH_MAX_LAG, HEALTH_MAX_PENDING, HEALTH_REDIS_DOWN_MS pass through).
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { maskUrl } from 'nestjs-redis-streams';
import { freePort } from './lib/ports.mjs';
import { SERVER_BIN, startRedisServer } from './lib/redis-server.mjs';
import { waitFor } from './lib/wait-for.mjs';
import { startLocalCluster } from './local-cluster.mjs';

const { values: args } = parseArgs({
  options: {
    orders: { type: 'string', default: '300' },
    once: { type: 'boolean', default: false },
    quiet: { type: 'boolean', default: false },
    cluster: { type: 'boolean', default: false },
  },
});
const total = Number(args.orders);
if (!Number.isSafeInteger(total) || total < 0) fail(`--orders must be a whole number, got ${args.orders}`);
const partitions = partitionCount(process.env.STREAMS_PARTITIONS);

const root = fileURLToPath(new URL('..', import.meta.url));
const group = process.env.STREAMS_GROUP || 'orders-workers';
const prefix = process.env.STREAMS_KEY_PREFIX ?? '';
// The keys of the `orders` stream: one, or one per partition ({orders:0} … as the library names them).
const streams =
  partitions === undefined ? [`${prefix}orders`] : (await import('nestjs-redis-streams')).partitionKeys(prefix, 'orders', partitions);
const children = new Set();
let embedded; // the throwaway redis-server, when we started one
let localCluster; // the throwaway local cluster, when we started one
let stopping = false;
process.on('exit', () => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

// A cluster: REDIS_CLUSTER_URLS, or with --cluster a throwaway local one. Otherwise one server.
const givenClusterUrls = process.env.REDIS_CLUSTER_URLS?.trim()
  ? process.env.REDIS_CLUSTER_URLS.split(',').map((u) => u.trim())
  : undefined;
const clusterUrls = givenClusterUrls ?? (args.cluster ? await startThrowawayCluster() : undefined);
const redisUrl = clusterUrls ? undefined : process.env.REDIS_URL || (await startEmbeddedRedis());
// Printed, so masked: the URLs may carry a password.
const where = maskUrl(clusterUrls ? `cluster ${clusterUrls[0]} (+${clusterUrls.length - 1} nodes)` : redisUrl);
const admin = clusterUrls ? clusterAdmin(clusterUrls) : new Redis(redisUrl, { maxRetriesPerRequest: 1 });
// ioredis fails the ping with its own "max retries per request" advice: the connection's last
// error (ECONNREFUSED, WRONGPASS) is the cause a user can act on.
let lastConnectionError;
admin.on('error', (err) => (lastConnectionError = err));
await within(admin.ping(), 10_000, 'no answer within 10 s').catch((err) => {
  const cause = /max retries per request/i.test(err.message) && lastConnectionError ? lastConnectionError : err;
  fail(`cannot reach Redis at ${where}: ${cause.message}`);
});
const startLengths = await Promise.all(streams.map((key) => admin.xlen(key)));
const throwaway = localCluster ? ' (local, throwaway)' : embedded ? ' (embedded, throwaway)' : '';
say(`redis   ${where}${throwaway}`);
if (partitions !== undefined) say(`stream  "orders" in ${partitions} partitions: ${streams.join(', ')}`);
// Where the worker and the producer connect: the cluster wins over REDIS_URL in both.
const redisEnv = clusterUrls ? { REDIS_CLUSTER_URLS: clusterUrls.join(',') } : { REDIS_URL: redisUrl };
// The worker's health and metrics listener (loopback unless HEALTH_HOST says otherwise).
const healthPort = process.env.HEALTH_PORT?.trim() || String(await freePort());
const healthHost = process.env.HEALTH_HOST?.trim() || '127.0.0.1';
const healthBase = `http://${healthHost.includes(':') ? `[${healthHost}]` : healthHost}:${healthPort}`;
say(`health  ${healthBase}/health/ready (and /health/live)  metrics ${healthBase}/metrics  dashboard ${healthBase}/dashboard/`);

const worker = spawn(process.execPath, [join(root, 'dist/apps/orders-worker/main.js')], {
  env: {
    ...process.env,
    ...redisEnv,
    STREAMS_GROUP: group,
    STREAMS_CONSUMER: process.env.STREAMS_CONSUMER || 'demo-worker-1',
    DEMO_WORK_MS: process.env.DEMO_WORK_MS || '5',
    HEALTH_PORT: healthPort,
  },
  stdio: ['ignore', 'pipe', 'pipe'],
  detached: true, // Ctrl-C reaches us; we stop the worker first, then Redis, so the order in hand is acked.
});
children.add(worker);
prefixLines(worker.stdout, 'worker  ', (line) => !args.quiet || !line.includes('[orders]'));
prefixLines(worker.stderr, 'worker  ', () => true);
const workerExit = new Promise((resolve) => worker.once('exit', (code, signal) => resolve(code ?? signal)));
workerExit.then((code) => {
  if (!stopping) fail(`the worker exited on its own (${code})`);
});

const stop = async (reason) => {
  if (stopping) return;
  stopping = true;
  say(`stopping (${reason}): SIGTERM to the worker, waiting for the order in hand`);
  worker.kill('SIGTERM');
  const code = await workerExit;
  // What is left, both ways: delivered and not acked (pending), and never delivered (lag).
  const left = await groupProgress().catch(() => ({ lag: '?', pending: '?' }));
  say(`worker exited with ${code}; ${left.pending} entries pending and ${left.lag} not yet delivered in group "${group}"`);
  admin.disconnect();
  await stopThrowawayRedis();
  process.exit(code === 0 ? 0 : 1);
};
process.on('SIGINT', () => void stop('Ctrl-C'));
process.on('SIGTERM', () => void stop('SIGTERM'));

// The producer: apps/orders-api emits the orders through RedisStreamsClient, then asks the
// worker for its tally with a request (client.send).
const api = spawn(process.execPath, [join(root, 'dist/apps/orders-api/main.js')], {
  env: { ...process.env, ...redisEnv, DEMO_ORDERS: String(total) },
  stdio: ['ignore', 'pipe', 'pipe'],
  detached: true,
});
children.add(api);
prefixLines(api.stdout, 'api     ', () => true);
prefixLines(api.stderr, 'api     ', () => true);
const apiExit = new Promise((resolve) => api.once('exit', (code, signal) => resolve(code ?? signal)));
let apiCode;
apiExit.then((code) => (apiCode = code));

// Progress until the producer is done and the group has acked everything.
const startedAt = Date.now();
await waitFor(
  async () => {
    // Stopping: the admin connection is going away, and stop() reports what is left pending.
    if (stopping) return true;
    const { lag, pending } = await groupProgress();
    const written = (await writtenPerStream()).reduce((sum, n) => sum + n, 0);
    say(`progress ${Math.max(0, written - lag - pending)}/${total} acked (written ${written}, lag ${lag}, pending ${pending})`);
    if (apiCode !== undefined && apiCode !== 0) fail(`the producer (apps/orders-api) exited with ${apiCode}`);
    return apiCode === 0 && lag + pending === 0;
  },
  { timeoutMs: Infinity, intervalMs: 500, message: 'every order acked' },
);
// stop() exits the process once the worker and Redis are down; nothing here may claim the orders acked.
if (stopping) await new Promise(() => {});
say(`all ${total} orders acked in ${Date.now() - startedAt} ms`);
if (partitions !== undefined) {
  const written = await writtenPerStream();
  say(`per partition: ${streams.map((key, i) => `${key} ${written[i]}`).join(', ')}`);
}
await showHealth();
if (args.once) await stop('--once');
else {
  const cli = maskUrl(clusterUrls ? `redis-cli -c -u ${clusterUrls[0]}` : `redis-cli -u ${redisUrl}`);
  say(`the worker keeps listening: try \`${cli} XADD '${streams[0]}' "*" order_id 42 status pending\`; Ctrl-C to stop`);
  say(`health and metrics meanwhile: curl ${healthBase}/health/ready ; curl ${healthBase}/metrics`);
}

/** What the worker's /health/ready and /metrics answer now (a line each); never fails the demo. */
async function showHealth() {
  const get = async (path) => {
    const res = await fetch(`${healthBase}${path}`, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, text: await res.text() };
  };
  try {
    const ready = await get('/health/ready');
    const figures = JSON.parse(ready.text).details?.['orders-worker'];
    const mine = (figures?.streams ?? []).filter((s) => streams.includes(s.stream));
    const lag = mine.reduce((sum, s) => sum + (s.lag ?? 0), 0);
    const pending = mine.reduce((sum, s) => sum + (s.pending ?? 0), 0);
    say(
      `health  GET /health/ready: ${ready.status} ${figures?.status ?? '?'} (state ${figures?.state ?? '?'}, lag ${lag}, pending ${pending})`,
    );
  } catch (err) {
    say(`health  GET /health/ready: no answer (${err.message})`);
  }
  try {
    // The counter is reported just after the ack: give it a moment to catch up with the last orders.
    let scrape;
    await waitFor(
      async () => {
        scrape = await get('/metrics');
        return scrape.status !== 200 || ackedIn(scrape.text) >= total;
      },
      { timeoutMs: 2000, intervalMs: 100, message: 'the acked counter' },
    ).catch((err) => {
      if (!scrape) throw err; // never answered
    });
    const { status } = scrape;
    const acked = ackedIn(scrape.text);
    say(
      `metrics GET /metrics: ${status}, messaging_redis_streams_consumed_messages_total{outcome="acked"} ${acked} for "orders" (and lag/pending gauges, process duration)`,
    );
  } catch (err) {
    say(`metrics GET /metrics: no answer (${err.message})`);
  }
}

/** Sum of the worker's acked-entries counter over the `orders` stream's keys, from Prometheus text. */
function ackedIn(text) {
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^messaging_redis_streams_consumed_messages_total\{(.*)\} (\S+)$/.exec(line);
    if (!m || !m[1].includes('messaging_redis_streams_outcome="acked"')) continue;
    const destination = /messaging_destination_name="((?:[^"\\]|\\.)*)"/.exec(m[1])?.[1];
    if (destination !== undefined && streams.includes(destination.replace(/\\(.)/g, '$1'))) sum += Number(m[2]);
  }
  return sum;
}

/** Lag and pending of the worker's group, summed over the stream's keys (XINFO GROUPS is per key). */
async function groupProgress() {
  const each = await Promise.all(streams.map((key) => keyProgress(key)));
  return each.reduce((sum, p) => ({ lag: sum.lag + p.lag, pending: sum.pending + p.pending }), { lag: 0, pending: 0 });
}

async function keyProgress(key) {
  const groups = await admin.xinfo('GROUPS', key).catch(() => []);
  for (const g of groups) {
    const info = {};
    for (let i = 0; i + 1 < g.length; i += 2) info[g[i]] = g[i + 1];
    if (info.name === group) return { lag: Number(info.lag ?? 0), pending: Number(info.pending ?? 0) };
  }
  // The worker has not created its group yet: everything in the stream is still to be read.
  return { lag: await admin.xlen(key).catch(() => 0), pending: 0 };
}

/** Entries added to each key since the start. */
async function writtenPerStream() {
  return Promise.all(streams.map(async (key, i) => (await admin.xlen(key).catch(() => startLengths[i])) - startLengths[i]));
}

async function startThrowawayCluster() {
  localCluster = await startLocalCluster({ log: (line) => say(line) }).catch((err) =>
    fail(`cannot start a local Redis Cluster: ${err.message}`),
  );
  return localCluster.urls;
}

/** An ioredis Cluster on the seed nodes; the URLs' credentials and TLS apply to every node. */
function clusterAdmin(urls) {
  let nodes;
  try {
    nodes = urls.map((text) => new URL(text));
  } catch {
    fail(`REDIS_CLUSTER_URLS must be comma-separated redis://host:port URLs, got ${maskUrl(urls.join(','))}`);
  }
  const first = nodes[0];
  return new Cluster(
    nodes.map((url) => ({ host: url.hostname.replace(/^\[(.*)\]$/, '$1'), port: Number(url.port || 6379) })),
    {
      redisOptions: {
        maxRetriesPerRequest: 1,
        ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
        ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
        ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
      },
    },
  );
}

function partitionCount(raw) {
  if (raw === undefined || raw.trim() === '') return undefined;
  if (!/^\s*\d+\s*$/.test(raw) || Number(raw) < 1) fail(`STREAMS_PARTITIONS must be a positive integer, got ${JSON.stringify(raw)}`);
  return Number(raw);
}

function within(promise, ms, message) {
  let timer;
  return Promise.race([promise, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

async function startEmbeddedRedis() {
  // detached: Ctrl-C reaches us; we stop the worker first, then Redis.
  embedded = await startRedisServer({ detached: true }).catch((err) => fail(`cannot start a throwaway ${SERVER_BIN}: ${err.message}`));
  children.add(embedded.proc);
  return embedded.url;
}

async function stopThrowawayRedis() {
  await localCluster?.stop();
  await embedded?.stop();
}

function prefixLines(input, prefix, keep) {
  let buf = '';
  input.on('data', (chunk) => {
    buf += chunk;
    const lines = buf.split('\n');
    buf = lines.pop();
    for (const line of lines) if (keep(line)) process.stdout.write(prefix + maskUrl(line) + '\n');
  });
}

// Every line the demo prints has its URLs' passwords masked (REDIS_URL may carry one).
function say(line) {
  process.stdout.write(`demo    ${maskUrl(line)}\n`);
}

function fail(message) {
  process.stderr.write(`demo: ${maskUrl(message)}\n`);
  process.exit(1);
}
