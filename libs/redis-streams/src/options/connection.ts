import type { RedisOptions } from 'ioredis';
import { InvalidOptionError } from './validate.js';

/** ioredis options or a `redis://` / `rediss://` URL. */
export type ConnectionOption = RedisOptions | string;

/** Turns a URL or ioredis options into ioredis options, rejecting what the transport cannot work with. */
export function resolveConnection(connection: ConnectionOption | undefined): RedisOptions {
  if (connection === undefined) return { host: '127.0.0.1', port: 6379 };
  if (typeof connection === 'string') {
    let url: URL;
    try {
      url = new URL(connection);
    } catch {
      throw new InvalidOptionError('connection', `not a valid URL: ${JSON.stringify(maskPassword(connection))}`);
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') {
      throw new InvalidOptionError('connection', `URL must start with redis:// or rediss://, got ${url.protocol}//`);
    }
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0;
    if (!Number.isInteger(db) || db < 0) throw new InvalidOptionError('connection', `bad database number in ${url.pathname}`);
    return {
      host: url.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
      port: url.port ? Number(url.port) : 6379,
      db,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
  }
  if (typeof connection !== 'object' || connection === null) {
    throw new InvalidOptionError('connection', 'expected ioredis options or a redis:// URL');
  }
  if (connection.keyPrefix) {
    // ioredis prefixes keys it sends but not the keys XREADGROUP replies with.
    throw new InvalidOptionError('connection.keyPrefix', 'use the transport option "keyPrefix" instead');
  }
  return { ...connection };
}

/** A URL as text with its password (between ':' and '@' after the scheme) masked, even when it does not parse. */
function maskPassword(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@]*@/i, '$1***@');
}

/** The connection as a URL for logs and errors, password masked: `redis://user:***@host:port/db`. */
export function describeConnection(options: RedisOptions): string {
  if (options.path) return `unix:${options.path}`;
  const scheme = options.tls ? 'rediss' : 'redis';
  const user = options.username ?? '';
  const auth = options.password ? `${user}:***@` : user ? `${user}@` : '';
  const host = options.host ?? '127.0.0.1';
  const db = options.db ? `/${options.db}` : '';
  return `${scheme}://${auth}${host.includes(':') ? `[${host}]` : host}:${options.port ?? 6379}${db}`;
}
