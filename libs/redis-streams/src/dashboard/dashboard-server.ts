import { timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RedisConnection } from '../redis/connection/connect.js';
import { InvalidOptionError } from '../options/validate.js';
import { createDashboardHandler, type DashboardHandler } from './dashboard-http.js';
import type { DashboardOptions } from './dashboard-options.js';

export interface DashboardServerOptions extends Omit<DashboardOptions, 'actions' | 'read'> {
  /** Default 3001; 0 picks a free port. */
  port?: number;
  /** Default 127.0.0.1: loopback only unless told otherwise. */
  host?: string;
  /** Redrive and delete, behind HTTP Basic auth with this password (any user name, which the action log names). Off without it. */
  actionsPassword?: string;
  /**
   * Every page and call behind HTTP Basic auth with this password, actions or not (a reader with it
   * sees no action unless it is also `actionsPassword`). With `actionsPassword` alone, that one is asked for every page.
   */
  readPassword?: string;
}

/** A listening dashboard. */
export interface ServedDashboard {
  server: Server;
  url: string;
  /**
   * Stops it: no new connection, and each open one closes after its response. `server.close()`
   * alone would wait for every open page (they poll every second over one kept-alive connection).
   */
  close(): Promise<void>;
}

/** The dashboard on a plain Node HTTP server (the CLI's `dashboard` command); resolves once it listens. */
export async function serveDashboard(redis: RedisConnection, options: DashboardServerOptions = {}): Promise<ServedDashboard> {
  const { port = 3001, host = '127.0.0.1', actionsPassword, readPassword, allowedHosts, ...rest } = options;
  if (actionsPassword !== undefined && (typeof actionsPassword !== 'string' || actionsPassword === ''))
    throw new InvalidOptionError('dashboard.actionsPassword', 'must be a non-empty string (leave it out for a read-only dashboard)');
  if (readPassword !== undefined && (typeof readPassword !== 'string' || readPassword === ''))
    throw new InvalidOptionError(
      'dashboard.readPassword',
      'must be a non-empty string (leave it out to let anyone who reaches the port read)',
    );
  const actor = actionsPassword === undefined ? undefined : basicUser(actionsPassword);
  const reader = readPassword === undefined ? undefined : basicUser(readPassword);
  // Either password reads; only the actions' one acts.
  const login = actor || reader ? (req: IncomingMessage) => actor?.(req) ?? reader?.(req) ?? null : undefined;
  // Made once listening: its Host check needs the port the server got.
  const serving: { handler?: DashboardHandler; closing?: boolean } = {};
  const server = createServer((req, res) => {
    if (serving.closing) res.setHeader('connection', 'close');
    // With actions on (or reads guarded), every page and call needs a password: the browser then sends it with the page's own calls.
    if (login && login(req) === null) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="redis-streams dashboard", charset="UTF-8"', 'content-type': 'text/plain' });
      return void res.end(
        actor
          ? 'the dashboard has actions on: sign in with its password\n'
          : 'the dashboard asks for its password to read: sign in with it\n',
      );
    }
    serving.handler!(req, res);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const shownHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  // The names this server answers to (DNS rebinding): its loopback names, the address it listens on, and those given.
  const own = ['127.0.0.1', 'localhost', '[::1]', shownHost].map((name) => `${name}:${address.port}`);
  try {
    serving.handler = createDashboardHandler(redis, {
      ...rest,
      allowedHosts: [...own, ...(allowedHosts ?? [])],
      ...(actor ? { actions: { authorize: actor } } : {}),
    });
  } catch (err) {
    // A refused option: the server must not stay listening (nor keep the process) with no handler.
    server.close();
    throw err;
  }
  const close = () =>
    new Promise<void>((resolve, reject) => {
      serving.closing = true;
      serving.handler!.drain();
      server.close((err) => (err ? reject(err) : resolve()));
    });
  return { server, url: `http://${shownHost}:${address.port}${(rest.basePath ?? '').replace(/\/$/, '')}/`, close };
}

/** Basic auth against one password, compared in constant time: the user name, or null. */
function basicUser(password: string): (req: IncomingMessage) => string | null {
  const expected = Buffer.from(password);
  return (req) => {
    const header = req.headers.authorization ?? '';
    if (!header.startsWith('Basic ')) return null;
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return null;
    const given = Buffer.from(decoded.slice(colon + 1));
    const ok = given.length === expected.length && timingSafeEqual(given, expected);
    return ok ? decoded.slice(0, colon) || 'anonymous' : null;
  };
}
