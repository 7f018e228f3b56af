// The one redis-server launcher of the repository's tests, scripts, benchmark and demo (typed in redis-server.d.mts):
// SERVER_BIN (REDIS_SERVER_BIN, e.g. valkey-server), loopback only, no persistence, a throwaway dir.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.mjs';
import { waitFor } from './wait-for.mjs';

/** The server binary: `redis-server`, or what REDIS_SERVER_BIN names (CI's Valkey pass: `valkey-server`). */
export const SERVER_BIN = process.env.REDIS_SERVER_BIN || 'redis-server';
const HOST = '127.0.0.1';

/** A binary is missing: retrying (other ports, more time) would not help. */
export class MissingBinaryError extends Error {}

export const missingBinary = (binary, err) =>
  new MissingBinaryError(
    `could not run ${binary} (${err.message}). Install it (apt-get install -y redis-server, which brings redis-cli too) or set REDIS_URL to a loopback server.`,
  );

/**
 * Spawns `bin` (default SERVER_BIN) on 127.0.0.1:`port` without persistence, plus `args`; returns at once. Without
 * a `--dir` in `args` the server gets a throwaway dir of its own, removed once it exited.
 */
export function spawnRedisServer(port, args = [], { detached = false, bin = SERVER_BIN } = {}) {
  const ownDir = args.includes('--dir') ? undefined : mkdtempSync(join(tmpdir(), 'redis-server-'));
  // --set-proc-title no: the title is written over the process' environment otherwise, and with it the test run's
  // marker (scripts/lib/leftovers.mjs), so a server a failed test leaked could not be found and stopped.
  const flags = [
    '--port',
    String(port),
    '--bind',
    HOST,
    '--save',
    '',
    '--appendonly',
    'no',
    '--set-proc-title',
    'no',
    ...(ownDir ? ['--dir', ownDir] : []),
    ...args,
  ];
  // detached: a Ctrl-C in the terminal reaches only the owning process, which decides when Redis goes.
  const proc = spawn(bin, flags, { stdio: 'ignore', detached });
  let spawnError;
  const server = {
    port,
    url: `redis://${HOST}:${port}`,
    proc,
    dead: false,
    exited: new Promise((resolve) => {
      proc.once('exit', () => resolve());
      proc.once('error', (err) => {
        spawnError = err;
        resolve();
      });
    }).then(() => {
      server.dead = true;
      if (ownDir) rmSync(ownDir, { recursive: true, force: true });
      if (spawnError) throw missingBinary(bin, spawnError);
    }),
    /** Sends `signal` (SIGTERM; SIGKILL for a crash) unless already gone; resolves once the process exited. */
    stop: async (signal = 'SIGTERM') => {
      if (!server.dead) proc.kill(signal);
      await server.exited.catch(() => {}); // a spawn error is start-up's to report
    },
  };
  server.exited.catch(() => {}); // reported through start-up; never an unhandled rejection
  return server;
}

/** Spawns a server (`bin`, default SERVER_BIN; on a free port unless `port` is given) and resolves once it answers PING. */
export async function startRedisServer({ port, args = [], detached = false, timeoutMs = 10_000, bin = SERVER_BIN } = {}) {
  const server = spawnRedisServer(port ?? (await freePort()), args, { detached, bin });
  try {
    await Promise.race([
      server.exited.then(() => {
        throw new Error(`${bin} on port ${server.port} exited during start-up`);
      }),
      waitFor(() => ping(server.url), { timeoutMs, message: `${bin} on port ${server.port}` }),
    ]);
  } catch (err) {
    await server.stop('SIGKILL');
    throw err;
  }
  return server;
}

/** True when the server at `url` answers PING now (one short-lived connection, no retries). */
export async function ping(url) {
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** An INFO (or CLUSTER INFO) reply as fields: `role:master` → `{ role: 'master' }`. */
export function parseInfo(text) {
  const fields = {};
  for (const line of String(text).split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}
