#!/usr/bin/env node
// A throwaway local Redis Cluster (3 masters + 3 replicas) from the installed redis-server and redis-cli,
// on random loopback ports, in a fresh temp dir. The same recipe as the tests' harness
// (test/support/redis-cluster.ts), as plain JS so the demo and the benchmark can use it without a build.
//
//   import { startLocalCluster } from './local-cluster.mjs';
//   const cluster = await startLocalCluster({ log: (line) => console.error(line) });
//   cluster.urls; // ['redis://127.0.0.1:<port>', …] (all 6 nodes)
//   await cluster.stop();
//
//   node scripts/local-cluster.mjs   prints the node URLs comma-separated, runs until Ctrl-C / SIGTERM
//
// The nodes are killed by pid on stop(), on process exit, and on SIGINT/SIGTERM when nothing else in the
// process listens for that signal (a process with its own handler, like the demo, decides when to stop).
import { execFile, spawn } from 'node:child_process';
import { realpathSync, rmSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';

const HOST = '127.0.0.1';
const NODE_COUNT = 6; // the smallest cluster `--cluster-replicas 1` accepts
const NODE_TIMEOUT_MS = 2000;
const BUS_OFFSET = 10_000; // Redis listens for the cluster bus on port + 10000, so base ports stay below 55536
const PORT_MIN = 20_000;
const PORT_MAX = 45_000;

class MissingBinaryError extends Error {}
const missing = (binary, err) =>
  new MissingBinaryError(`could not run ${binary} (${err.message}): install it (apt-get install -y redis-server brings redis-cli too)`);

/**
 * Starts a 6-node cluster; resolves once every node reports cluster_state:ok with all 16384 slots assigned
 * and all 6 nodes known. A failed start is retried once on new ports (a port can be taken between the check
 * and the bind).
 * @param {{ log?: (line: string) => void }} [options]
 * @returns {Promise<{ urls: string[], ports: number[], stop(): Promise<void> }>}
 */
export async function startLocalCluster({ log } = {}) {
  const say = typeof log === 'function' ? log : () => {};
  try {
    return await launch(say);
  } catch (first) {
    if (first instanceof MissingBinaryError) throw first;
    say(`local cluster: first start failed, retrying on new ports (${first.message.split('\n')[0]})`);
    try {
      return await launch(say);
    } catch (second) {
      throw new Error(`could not start a local Redis Cluster twice:\n1) ${first.message}\n2) ${second.message}`, { cause: second });
    }
  }
}

async function launch(say) {
  const ports = await pickPorts(NODE_COUNT);
  const dir = await mkdtemp(join(tmpdir(), 'redis-local-cluster-'));
  const nodes = []; // { port, proc, log, exited }
  const admins = new Map();

  const killNow = () => {
    for (const n of nodes) if (n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill('SIGKILL');
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a leftover temp dir is harmless
    }
  };
  const onSignal = (signal) => {
    // Someone else handles this signal: they stop us (or exit, and the 'exit' handler does).
    if (process.listenerCount(signal) > 1) return;
    killNow();
    removeHandlers();
    process.kill(process.pid, signal); // keep the signal's default: terminate
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

  const closeAdmins = () => {
    for (const a of admins.values()) a.disconnect();
    admins.clear();
  };
  let stopping;
  const stop = () =>
    (stopping ??= (async () => {
      closeAdmins();
      await Promise.all(
        nodes.map(async (n) => {
          if (n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill('SIGKILL'); // throwaway data
          await n.exited.catch(() => {}); // a spawn error is start-up's to report
        }),
      );
      await rm(dir, { recursive: true, force: true });
      removeHandlers();
    })());

  const cmd = (port, ...args) => {
    let admin = admins.get(port);
    if (!admin) {
      admin = new Redis({ host: HOST, port, maxRetriesPerRequest: 0, retryStrategy: () => 20 });
      admin.on('error', () => {});
      admins.set(port, admin);
    }
    return admin.call(args[0], args.slice(1));
  };

  try {
    say(`local cluster: starting ${NODE_COUNT} redis-server nodes on ${HOST} ports ${ports.join(', ')}`);
    for (const port of ports) nodes.push(spawnNode(dir, port));
    await Promise.all(
      nodes.map((n) =>
        Promise.race([
          n.exited.then(async () => {
            throw new Error(`redis-server on port ${n.port} exited during start-up:\n${await logTail(n.log)}`);
          }),
          poll(async () => (await cmd(n.port, 'PING')) === 'PONG', 10_000, `redis-server on port ${n.port} to answer PING`),
        ]),
      ),
    );
    say('local cluster: redis-cli --cluster create (3 masters, 3 replicas)');
    await createCluster(ports);
    await poll(
      async () => {
        for (const port of ports) {
          const info = parseInfo(await cmd(port, 'CLUSTER', 'INFO'));
          if (info.cluster_state !== 'ok' || info.cluster_slots_assigned !== '16384' || info.cluster_known_nodes !== String(NODE_COUNT))
            return false;
        }
        return true;
      },
      20_000,
      'cluster_state:ok with all 16384 slots and 6 known nodes on every node',
    );
    closeAdmins();
    say(`local cluster: ready (cluster_state:ok on all ${NODE_COUNT} nodes)`);
  } catch (err) {
    closeAdmins();
    const logs = await Promise.all(nodes.map(async (n) => `--- node ${n.port} log ---\n${await logTail(n.log)}`));
    await stop();
    if (err instanceof MissingBinaryError) throw err;
    throw new Error(`${err.message}\n${logs.join('\n')}`, { cause: err });
  }

  return { urls: ports.map((port) => `redis://${HOST}:${port}`), ports: [...ports], stop };
}

function spawnNode(dir, port) {
  const log = join(dir, `node-${port}.log`);
  // Same settings as test/support/redis-cluster.ts; --repl-diskless-sync-delay 0 because each master has one replica.
  const args = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    join(dir, `nodes-${port}.conf`),
    '--cluster-node-timeout',
    String(NODE_TIMEOUT_MS),
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    '--logfile',
    log,
    '--repl-diskless-sync-delay',
    '0',
  ];
  // detached: a Ctrl-C in the terminal reaches only the owning process, which can drain its consumers
  // before the cluster goes away.
  const proc = spawn('redis-server', args, { stdio: 'ignore', detached: true });
  let spawnError;
  const exited = new Promise((resolve) => {
    proc.once('exit', () => resolve());
    proc.once('error', (err) => {
      spawnError = err;
      resolve();
    });
  }).then(() => {
    if (spawnError) throw missing('redis-server', spawnError);
  });
  exited.catch(() => {}); // reported through the start-up race; never an unhandled rejection
  return { port, proc, log, exited };
}

function createCluster(ports) {
  const args = ['--cluster', 'create', ...ports.map((p) => `${HOST}:${p}`), '--cluster-replicas', '1', '--cluster-yes'];
  return new Promise((resolve, reject) =>
    // redis-cli waits for the nodes to join without a deadline of its own.
    execFile('redis-cli', args, { timeout: 30_000 }, (err, stdout, stderr) => {
      if (!err) return resolve();
      if (err.code === 'ENOENT') return reject(missing('redis-cli', err));
      const why = err.killed ? 'timed out after 30 s' : `exit code ${String(err.code)}`;
      reject(new Error(`redis-cli ${args.join(' ')} failed (${why}):\n${tail(stdout + stderr)}`));
    }),
  );
}

/** Polls `condition` every 50 ms until it is truthy; rejects with the last error after `timeoutMs`. */
async function poll(condition, timeoutMs, message) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      if (await condition()) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${message}${last ? ` (last: ${last.message})` : ''}`);
    await new Promise((r) => setTimeout(r, 50)); // poll interval
  }
}

/** `count` random base ports whose port and bus port (+10000) are both free on the loopback interface (the test harness uses it too). */
export async function pickPorts(count) {
  const ports = [];
  const taken = new Set(); // one node's bus port may not be another's base port
  for (let tries = 0; ports.length < count; tries++) {
    if (tries > 1000) throw new Error(`found no ${count} free port pairs (P, P+${BUS_OFFSET}) in ${PORT_MIN}-${PORT_MAX}`);
    const port = PORT_MIN + Math.floor(Math.random() * (PORT_MAX - PORT_MIN));
    const bus = port + BUS_OFFSET;
    if (taken.has(port) || taken.has(bus) || !(await isFree(port)) || !(await isFree(bus))) continue;
    taken.add(port).add(bus);
    ports.push(port);
  }
  return ports;
}

function isFree(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}

function parseInfo(text) {
  const fields = {};
  for (const line of String(text).split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

async function logTail(path) {
  return tail(await readFile(path, 'utf8').catch(() => '(no log)'));
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
