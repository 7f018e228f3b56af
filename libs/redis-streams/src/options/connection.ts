import type { ClusterOptions, RedisOptions } from 'ioredis';
import { maskUrl } from '../redact.js';
import { InvalidOptionError } from './validate.js';

/** A Redis Cluster: seed nodes (any reachable node will do; ioredis discovers the rest) and ioredis' ClusterOptions. */
export interface ClusterConnection {
  /** Seed nodes, as `{ host, port }` or `redis://` / `rediss://` URLs. */
  cluster: readonly (string | { host: string; port: number })[];
  /** ioredis ClusterOptions; `redisOptions` apply to every node connection (password, tls …). */
  options?: ClusterOptions;
}

/**
 * Where Redis is: ioredis options or a `redis://` / `rediss://` URL for one node; a
 * {@link ClusterConnection} or a list of node URLs for a cluster.
 */
export type ConnectionOption = RedisOptions | string | readonly string[] | ClusterConnection;

/** A validated cluster connection: seeds, and the options of the ioredis Cluster. */
export interface ResolvedCluster {
  cluster: { host: string; port: number }[];
  options: ClusterOptions;
}

/** One node's ioredis options, or a cluster. */
export type ResolvedConnection = RedisOptions | ResolvedCluster;

export const isCluster = (connection: ResolvedConnection): connection is ResolvedCluster =>
  'cluster' in connection && Array.isArray(connection.cluster);

/** Turns a URL, a URL list or ioredis options into a validated connection, rejecting what the transport cannot work with. */
export function resolveConnection(connection: ConnectionOption | undefined): ResolvedConnection {
  if (connection === undefined) return { host: '127.0.0.1', port: 6379 };
  if (typeof connection === 'string') return fromUrl('connection', connection);
  if (Array.isArray(connection)) return resolveCluster({ cluster: connection });
  if (typeof connection !== 'object' || connection === null) {
    throw new InvalidOptionError(
      'connection',
      'expected ioredis options, a redis:// URL, a list of cluster node URLs or { cluster: [...] }',
    );
  }
  if ('cluster' in connection) return resolveCluster(connection as ClusterConnection);
  const node = connection as RedisOptions;
  if (node.keyPrefix) {
    // ioredis prefixes keys it sends but not the keys XREADGROUP replies with.
    throw new InvalidOptionError('connection.keyPrefix', 'use the transport option "keyPrefix" instead');
  }
  return { ...node };
}

function resolveCluster(input: ClusterConnection): ResolvedCluster {
  const seeds: unknown = input.cluster;
  if (!Array.isArray(seeds) || seeds.length === 0) throw new InvalidOptionError('connection.cluster', 'must list at least one seed node');
  const options: ClusterOptions = { ...(input.options ?? {}) };
  if (options.keyPrefix || options.redisOptions?.keyPrefix) {
    throw new InvalidOptionError('connection.options.keyPrefix', 'use the transport option "keyPrefix" instead');
  }
  if (options.redisOptions?.db) throw new InvalidOptionError('connection.options.redisOptions.db', 'a cluster has only database 0');
  if (options.maxRedirections !== undefined && !(options.maxRedirections >= 1)) {
    // ioredis then reports every error reply (BUSYGROUP, NOGROUP …) as "Too many Cluster redirections".
    throw new InvalidOptionError(
      'connection.options.maxRedirections',
      'must be at least 1 (0 turns every Redis error into "Too many Cluster redirections")',
    );
  }
  // Credentials and TLS of the URLs apply to every node (a cluster shares them): all seeds must agree.
  let fromUrls: RedisOptions | undefined;
  let shared: string | undefined;
  const cluster = seeds.map((seed: unknown, i) => {
    const what = `connection.cluster[${i}]`;
    if (typeof seed === 'string') {
      const node = fromUrl(what, seed);
      if (node.db) throw new InvalidOptionError(what, 'a cluster has only database 0');
      const auth = {
        ...(node.username ? { username: node.username } : {}),
        ...(node.password ? { password: node.password } : {}),
        ...(node.tls ? { tls: node.tls } : {}),
      };
      const same = JSON.stringify(auth);
      if (shared !== undefined && same !== shared) {
        throw new InvalidOptionError(
          what,
          'every seed URL of a cluster must have the same credentials and scheme (they apply to all nodes)',
        );
      }
      shared = same;
      fromUrls = auth;
      return { host: node.host!, port: node.port! };
    }
    if (typeof seed !== 'object' || seed === null) throw new InvalidOptionError(what, 'expected { host, port } or a redis:// URL');
    const { host, port } = seed as { host?: unknown; port?: unknown };
    if (typeof host !== 'string' || host === '') throw new InvalidOptionError(`${what}.host`, 'must be a non-empty string');
    if (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535)
      throw new InvalidOptionError(`${what}.port`, 'must be a port number (1-65535)');
    return { host, port: port as number };
  });
  if (fromUrls && Object.keys(fromUrls).length > 0) options.redisOptions = { ...fromUrls, ...options.redisOptions };
  return { cluster, options };
}

function fromUrl(what: string, text: string): RedisOptions {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new InvalidOptionError(what, `not a valid URL: ${JSON.stringify(maskUrl(text))}`);
  }
  if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
    throw new InvalidOptionError(what, `URL must start with redis:// or rediss://, got ${url.protocol}//`);
  }
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
  if (!Number.isInteger(db) || db < 0) throw new InvalidOptionError(what, `bad database number in ${maskUrl(url.pathname)}`);
  return {
    host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: url.port ? Number(url.port) : 6379,
    db,
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/** The connection as URLs for logs and errors, password masked: `redis://user:***@host:port/db`, or `cluster(…)`. */
export function describeConnection(connection: ResolvedConnection): string {
  if (isCluster(connection)) {
    const node = connection.options.redisOptions ?? {};
    return `cluster(${connection.cluster.map((seed) => describeNode({ ...node, ...seed })).join(', ')})`;
  }
  return describeNode(connection);
}

function describeNode(options: RedisOptions): string {
  if (options.path) return `unix:${options.path}`;
  const scheme = options.tls ? 'rediss' : 'redis';
  const user = encodeURIComponent(options.username ?? '');
  const auth = options.password ? `${user}:${encodeURIComponent(options.password)}@` : user ? `${user}@` : '';
  const host = options.host ?? '127.0.0.1';
  const db = options.db ? `/${options.db}` : '';
  // Masked by the one helper every output uses (encoded, the password has no '@' or space to stop it early).
  return maskUrl(`${scheme}://${auth}${host.includes(':') ? `[${host}]` : host}:${options.port ?? 6379}${db}`);
}

/** The passwords of a connection (node, cluster nodes, sentinels): masked wherever an error or a log line might quote them. */
export function secretsOf(connection: ResolvedConnection): string[] {
  const nodes: RedisOptions[] = isCluster(connection) ? [connection.options.redisOptions ?? {}] : [connection];
  return nodes.flatMap((n) => [n.password, n.sentinelPassword]).filter((p): p is string => typeof p === 'string' && p !== '');
}
