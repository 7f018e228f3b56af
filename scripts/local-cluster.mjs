#!/usr/bin/env node
// The one local Redis Cluster spawner (3 masters + 3 replicas) of the tests' harness (test/support/redis-cluster.ts
// builds failovers on it), the demo and the benchmark: plain JS, so they can use it without a build.
//
//   import { startLocalCluster } from './local-cluster.mjs';
//   const cluster = await startLocalCluster({ log: (line) => console.error(line) });
//   cluster.urls; // ['redis://127.0.0.1:<port>', …] (all 6 nodes)
//   await cluster.stop();
//
//   node scripts/local-cluster.mjs   prints the node URLs comma-separated, runs until Ctrl-C / SIGTERM
//
// The nodes (SERVER_BIN, loopback, free ports, a fresh temp dir) are killed by pid on stop(), on process exit,
// and on SIGINT/SIGTERM: always with `signals: 'always'`, otherwise only when nothing else in the process
// listens for that signal (a process with its own handler, like the demo, decides when to stop).
import { execFile } from 'node:child_process';
import { realpathSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import { freePortPairs } from './lib/ports.mjs';
import { MissingBinaryError, missingBinary, parseInfo, SERVER_BIN, spawnRedisServer } from './lib/redis-server.mjs';
import { waitFor } from './lib/wait-for.mjs';

const HOST = '127.0.0.1';
const NODE_COUNT = 6; // the smallest cluster `--cluster-replicas 1` accepts
export const NODE_TIMEOUT_MS = 2000;
/** Deadline of one polling command (CLUSTER INFO and the like answer in a ms). */
const POLL_TIMEOUT_MS = 5000;

/**
 * Starts a 6-node cluster; resolves once every node reports cluster_state:ok with all 16384 slots assigned
 * and all 6 nodes known, and `ready` (if given) resolved. A failed start is retried once on new ports (a port
 * can be taken between the check and the bind).
 */
export async function startLocalCluster({ log, detached = true, signals = 'when-unhandled', ready } = {}) {
  const say = typeof log === 'function' ? log : () => {};
  const start = () => launch({ say, detached, signals, ready });
  try {
    return await start();
  } catch (first) {
    if (first instanceof MissingBinaryError) throw first;
    say(`local cluster: first start failed, retrying on new ports (${first.message.split('\n')[0]})`);
    try {
      return await start();
    } catch (second) {
      throw new Error(`could not start a local Redis Cluster twice:\n1) ${first.message}\n2) ${second.message}`, { cause: second });
    }
  }
}

async function launch({ say, detached, signals, ready }) {
  const ports = await freePortPairs(NODE_COUNT); // a node's cluster bus listens on port + 10000
  const dir = await mkdtemp(join(tmpdir(), 'redis-cluster-'));
  const nodes = new Map(); // port → spawned server
  const logOf = (port) => join(dir, `node-${port}.log`);
  const logTail = async (port, lines) => tail(await readFile(logOf(port), 'utf8').catch(() => '(no log)'), lines);
  // A crashed node's report from its start (the assertion and stack trace): its log's tail is only the memory test.
  // Only since the node last started (a revived node's log goes on in the same file); Valkey says VALKEY.
  const crashReport = async (port) => {
    const log = await readFile(logOf(port), 'utf8').catch(() => '');
    const since = log.slice(Math.max(0, log.lastIndexOf('is starting oO0OoO0OoO0Oo')));
    const start = since.search(/=== (REDIS|VALKEY) BUG REPORT START/);
    return start < 0 ? null : since.slice(start).split('\n').slice(0, 60).join('\n');
  };
  const node = (port) => {
    const n = nodes.get(port);
    if (!n) throw new Error(`port ${port} is not a node of this cluster (${ports.join(', ')})`);
    return n;
  };

  // Polling connections, one per node, opened on demand: no request retries and a short reconnect, so a
  // poll fails fast and waitFor asks again. A dead node is never asked: it would only retry until the deadline.
  const admins = new Map();
  const closeAdmin = (port) => {
    admins.get(port)?.disconnect();
    admins.delete(port);
  };
  const call = (port, command, ...args) => {
    if (node(port).dead) return Promise.reject(new Error(`node ${port} is dead`));
    let admin = admins.get(port);
    if (!admin) {
      // A deadline of its own: a node frozen (SIGSTOP) or wedged fails the poll instead of holding it for good.
      admin = new Redis({ host: HOST, port, maxRetriesPerRequest: 0, retryStrategy: () => 20, commandTimeout: POLL_TIMEOUT_MS });
      admin.on('error', () => {});
      admins.set(port, admin);
    }
    return admin.call(command, args);
  };

  // Last resort when stop() never runs: no node may outlive this process. Synchronous, as 'exit' handlers must be.
  const killNow = () => {
    for (const n of nodes.values()) if (!n.dead) n.proc.kill('SIGKILL');
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a leftover temp dir is harmless; a throw here would mask the real exit
    }
  };
  const onSignal = (signal) => {
    if (signals !== 'always' && process.listenerCount(signal) > 1) return; // someone else stops us
    killNow();
    removeHandlers();
    // Keep the signal fatal once no other listener (another cluster's, the runner's) is left to act.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  const onSigint = () => onSignal('SIGINT');
  const onSigterm = () => onSignal('SIGTERM');
  const removeHandlers = () => {
    process.off('exit', killNow);
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigterm);
  };
  process.on('exit', killNow);
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigterm);

  let stopping;
  const stop = () =>
    (stopping ??= (async () => {
      for (const port of [...admins.keys()]) closeAdmin(port);
      await Promise.all([...nodes.values()].map((n) => n.stop('SIGKILL'))); // throwaway data: no graceful shutdown
      await rm(dir, { recursive: true, force: true });
      removeHandlers();
    })());

  const spawnNode = (port) => {
    const n = spawnRedisServer(port, nodeArgs(dir, port, logOf(port)), { detached });
    n.exited.then(() => closeAdmin(port)).catch(() => {});
    nodes.set(port, n);
    return n;
  };
  const answers = (n) =>
    Promise.race([
      n.exited.then(async () => {
        throw new Error(`${SERVER_BIN} on port ${n.port} exited during start-up:\n${await logTail(n.port)}`);
      }),
      waitFor(async () => (await call(n.port, 'PING')) === 'PONG', { timeoutMs: 10_000, message: `${SERVER_BIN} on port ${n.port}` }),
    ]);
  // A node killed (kill -9) started again as the same node: same port, dir and nodes.conf, so it rejoins under its
  // old id (a master whose slots were taken over comes back as a replica of the node that took them).
  const revive = async (port) => {
    if (stopping) throw new Error(`node ${port}: the cluster is stopping`);
    if (!node(port).dead) throw new Error(`node ${port} still runs: only a dead node can be revived`);
    closeAdmin(port);
    await answers(spawnNode(port));
  };

  const cluster = {
    urls: ports.map((port) => `redis://${HOST}:${port}`),
    ports: [...ports],
    dir,
    node,
    call,
    logTail,
    crashReport,
    revive,
    stop,
  };
  try {
    say(`local cluster: starting ${NODE_COUNT} ${SERVER_BIN} nodes on ${HOST} ports ${ports.join(', ')}`);
    for (const port of ports) spawnNode(port);
    await Promise.all([...nodes.values()].map(answers));
    say('local cluster: redis-cli --cluster create (3 masters, 3 replicas)');
    await createCluster(ports);
    await waitFor(
      async () => {
        for (const port of ports) {
          const info = parseInfo(await call(port, 'CLUSTER', 'INFO'));
          if (info.cluster_state !== 'ok' || info.cluster_slots_assigned !== '16384' || info.cluster_known_nodes !== String(NODE_COUNT))
            return false;
        }
        return true;
      },
      { timeoutMs: 20_000, intervalMs: 50, message: 'cluster_state:ok with all 16384 slots and 6 known nodes on every node' },
    );
    if (ready) await ready(cluster);
    for (const port of [...admins.keys()]) closeAdmin(port); // reopened on demand by call()
    say(`local cluster: ready (cluster_state:ok on all ${NODE_COUNT} nodes)`);
  } catch (err) {
    if (err instanceof MissingBinaryError) {
      await stop();
      throw err;
    }
    const logs = await Promise.all(ports.map(async (port) => `--- node ${port} log ---\n${await logTail(port)}`)); // before stop() removes them
    await stop();
    throw new Error(`${err.message}\n${logs.join('\n')}`, { cause: err });
  }
  return cluster;
}

function nodeArgs(dir, port, log) {
  return [
    ...['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`)],
    ...['--cluster-node-timeout', String(NODE_TIMEOUT_MS), '--dir', dir, '--logfile', log],
    // The default 5 s delay only waits for more replicas to share one transfer; each master here has one.
    ...['--repl-diskless-sync-delay', '0'],
  ];
}

function createCluster(ports) {
  const args = ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', '1', '--cluster-yes'];
  return new Promise((resolve, reject) =>
    // redis-cli waits for the nodes to join without a deadline of its own.
    execFile('redis-cli', args, { timeout: 30_000 }, (err, stdout, stderr) => {
      if (!err) return resolve();
      if (err.code === 'ENOENT') return reject(missingBinary('redis-cli', err));
      const why = err.killed ? 'timed out after 30 s' : `exit code ${String(err.code)}`;
      reject(new Error(`redis-cli ${args.join(' ')} failed (${why}):\n${tail(stdout + stderr)}`));
    }),
  );
}

function tail(text, lines = 15) {
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

// Run directly: start a cluster, print its URLs, keep it until SIGINT/SIGTERM.
const runDirectly = (() => {
  try {
    return process.argv[1] !== undefined && pathToFileURL(realpathSync(process.argv[1])).href === import.meta.url;
  } catch {
    return false;
  }
})();
if (runDirectly) {
  const cluster = await startLocalCluster({ log: (line) => process.stderr.write(`${line}\n`) }).catch((err) => {
    process.stderr.write(`local-cluster: ${err.message}\n`);
    process.exit(1);
  });
  process.stdout.write(`${cluster.urls.join(',')}\n`);
  process.stderr.write(`local cluster running; e.g. REDIS_CLUSTER_URLS=${cluster.urls.join(',')}  (Ctrl-C to stop)\n`);
  const shutdown = (signal) => {
    process.stderr.write(`local cluster: ${signal}, stopping\n`);
    cluster.stop().then(
      () => process.exit(0),
      (err) => {
        process.stderr.write(`local-cluster: ${err.message}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}
