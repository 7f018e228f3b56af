import type { ChildProcess } from 'node:child_process';

/** The server binary: `redis-server`, or what REDIS_SERVER_BIN names (CI's Valkey pass: `valkey-server`). */
export const SERVER_BIN: string;

/** A binary is missing: retrying would not help. */
export class MissingBinaryError extends Error {}
export function missingBinary(binary: string, err: Error): MissingBinaryError;

/** One spawned redis-server on 127.0.0.1. */
export interface RedisServerProcess {
  readonly port: number;
  /** redis://127.0.0.1:<port> */
  readonly url: string;
  readonly proc: ChildProcess;
  /** True once the process is gone. */
  readonly dead: boolean;
  /** Resolves once the process exited; rejects with a MissingBinaryError when it never started. */
  readonly exited: Promise<void>;
  /** Sends `signal` (default SIGTERM; SIGKILL for a crash) unless already gone; resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

/** Spawns SERVER_BIN (or `bin`) on 127.0.0.1:`port` (no persistence, a throwaway dir unless `args` has `--dir`); returns at once. */
export function spawnRedisServer(
  port: number,
  args?: readonly string[],
  options?: { detached?: boolean; bin?: string },
): RedisServerProcess;

/** Spawns a server (on a free port unless given) and resolves once it answers PING (default deadline 10 s). */
export function startRedisServer(options?: {
  port?: number;
  args?: readonly string[];
  detached?: boolean;
  timeoutMs?: number;
  /** The binary: SERVER_BIN by default. */
  bin?: string;
}): Promise<RedisServerProcess>;

/** True when the server at `url` answers PING now. */
export function ping(url: string): Promise<boolean>;

/** An INFO (or CLUSTER INFO) reply as fields: `role:master` → `{ role: 'master' }`. */
export function parseInfo(text: string): Record<string, string>;
