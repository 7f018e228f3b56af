import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeError } from '../describe-error.js';
import {
  isCommandTimeout,
  isConnectionLoss,
  isErrorReply,
  isHandshakeRefusal,
  isServerUnavailable,
  isUnanswered,
} from '../redis/replies/redis-errors.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import { PendingActions } from '../ops/pending-actions.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { runAction, ActionRefused } from './dashboard-actions.js';
import { BadRequest, count, deadStream, isStreamId, need, streamId, workStream, type DashboardContext } from './dashboard-keys.js';
import { deadLetterSourcesOf } from '../key-names.js';
import { within } from '../within.js';
import { DashboardData } from './dashboard-data.js';
import { resolveDashboardOptions, type DashboardAuthorize, type DashboardOptions } from './dashboard-options.js';
import { APP_SCRIPT } from './app-script.js';
import { APP_CSS, FAVICON_SVG, pageHtml } from './dashboard-page.js';

/** A Node request handler, Connect-style (Express and Fastify middleware both take it): `next` for paths that are not the dashboard's. */
export type DashboardHandler = ((req: IncomingMessage, res: ServerResponse, next?: () => void) => void) & {
  /**
   * Before the HTTP server closes: from now on every response of the dashboard, and those not yet
   * sent, close their connection. An open page polls every second over one kept-alive connection,
   * which the server's close would otherwise wait for until the tab goes. It also stops the charts'
   * history sampler (its timer never holds the process open, and stops once the connection is closed).
   */
  drain(): void;
};

/** Bytes of each value shown unless asked in full, and the most shown in full (a larger value says its size). */
const PREVIEW_BYTES = 2_000;
const FULL_BYTES = 1_000_000;

const HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Only its own script and style; no framing (clickjacking), no form posts elsewhere.
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
};

/**
 * The dashboard as a request handler: the page, its script and style, and the JSON API under
 * `<basePath>/api/`. Read-only unless `actions` is given. Reads through `redis` (the caller owns it).
 * `unanswered`: why a call got no answer from Redis, in words (the module's connection names its own
 * last error); by default what the failure itself says.
 */
export function createDashboardHandler(
  redis: RedisConnection,
  input: DashboardOptions = {},
  unanswered: (err: unknown) => string = unansweredCause,
): DashboardHandler {
  const options = resolveDashboardOptions(input);
  const data = new DashboardData(redis, options);
  const dlq = new DeadLetters(redis);
  const pending = new PendingActions(redis);
  const unsent = new Set<ServerResponse>();
  let draining = false;
  const closeWhenDraining = (res: ServerResponse) => {
    if (draining) return res.setHeader('connection', 'close');
    unsent.add(res);
    res.once('close', () => unsent.delete(res));
  };
  const handler = (req: IncomingMessage, res: ServerResponse, next?: () => void): void => {
    // originalUrl: Express strips a mount path from req.url.
    const raw = (req as { originalUrl?: string }).originalUrl ?? req.url ?? '/';
    // The query alone, from the request target as sent: new URL() throws on a path such as `//` (no host).
    const query = new URLSearchParams(raw.includes('?') ? raw.slice(raw.indexOf('?') + 1) : '');
    // Matched on the path as sent, not as URL resolves it: `/x/../ops` must not reach what a guard on `/ops` protects.
    const path = rawPath(raw);
    if (path === null || (path !== options.basePath && !path.startsWith(`${options.basePath}/`))) {
      if (next) return next();
      return send(res, 404, { error: 'not found' });
    }
    closeWhenDraining(res);
    // DNS rebinding: a page of another site that resolves its name to this loopback address sends its own Host.
    if (options.allowedHosts && !options.allowedHosts.includes((req.headers.host ?? '').toLowerCase()))
      return send(res, 421, { error: 'unknown Host: this dashboard answers only the names it was started for' });
    const TIMEOUT = Symbol('timeout');
    const sub = path.slice(options.basePath.length);
    // What the request waits for, said if it is late: the read guard's verdict, then Redis.
    let waiting: string = options.authorizeRead ? 'the read guard' : 'redis';
    within(
      names(req, options.authorizeRead, true)
        .then((allowed) => {
          waiting = 'redis';
          const ctx = { data, dlq, pending, options };
          return allowed ? route(req, res, sub, query, ctx, (what) => (waiting = what)) : refuseRead(res, sub);
        })
        .then(() => undefined),
      options.requestTimeoutMs,
      TIMEOUT,
    ).then(
      (late) => {
        if (late !== TIMEOUT) return;
        const ms = options.requestTimeoutMs;
        if (waiting !== 'redis') return send(res, 503, { error: `${waiting} did not come within ${ms} ms: nothing was done` });
        // An action sent to Redis is not withdrawn by this answer: it may still be done once Redis answers.
        if (req.method === 'POST')
          return send(res, 503, {
            error: `Redis did not answer within ${ms} ms: the action may still be carried out once it answers; look before trying again`,
            outcome: 'unknown',
          });
        send(res, 503, { error: `Redis did not answer within ${ms} ms` });
      },
      (err: unknown) => {
        if (err instanceof ActionRefused)
          return send(res, err.status, { error: err.message, ...(err.reason ? { reason: err.reason } : {}) });
        if (err instanceof BadRequest) return send(res, 400, { error: err.message });
        // No answer (a connection down or lost, a deadline passed), or no connection its credentials open:
        // the dashboard cannot reach its Redis, which is no fault of the request.
        if (isUnanswered(err) || isHandshakeRefusal(err)) {
          const error = `Redis unreachable: ${unanswered(err).replace(/\.$/, '')}`;
          // An action cut off by a lost connection may have been carried out, or some of it (a redrive of several
          // letters); one past its deadline is still in Redis' hands.
          const outcome = isCommandTimeout(err)
            ? 'the action may still be carried out once it answers'
            : 'the action may have been carried out in part or not at all';
          if (req.method === 'POST') return send(res, 503, { error: `${error}: ${outcome}; look before trying again`, outcome: 'unknown' });
          return send(res, 503, { error });
        }
        // Redis serves no one now (BUSY in a script, LOADING, CLUSTERDOWN …): no fault of the request either.
        if (isServerUnavailable(err)) return send(res, 503, { error: `Redis unavailable: ${describeError(err)}` });
        // Redis refused what the request named (NOGROUP, an id past the last one, NOPERM): said as Redis said it.
        if (isErrorReply(err)) return send(res, 400, { error: `Redis refused: ${describeError(err)}` });
        // describeError masks credentials; the message is all a browser gets.
        send(res, 500, { error: describeError(err) });
      },
    );
  };
  const drain = () => {
    draining = true;
    // The history's sampler stops with it: nothing of the dashboard's runs on after its server.
    data.close();
    for (const res of unsent) if (!res.headersSent) res.setHeader('connection', 'close');
  };
  return Object.assign(handler, { drain });
}

/** Whether `authorize` names someone for this request (none given: `fallback`); one that throws refuses. */
async function names(req: IncomingMessage, authorize: DashboardAuthorize | undefined, fallback: boolean): Promise<boolean> {
  if (!authorize) return fallback;
  const who = await Promise.resolve()
    .then(() => authorize(req))
    .catch(() => null);
  return who !== null && who !== undefined && who !== '';
}

/** A page, an asset or a call the read guard refused: nothing of the dashboard, not even its script. */
function refuseRead(res: ServerResponse, path: string): void {
  if (path.startsWith('/api/')) return send(res, 403, { error: 'not authorized to read this dashboard' });
  res.writeHead(403, { ...HEADERS, 'content-type': 'text/plain; charset=utf-8' }).end('not authorized to read this dashboard\n');
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  q: URLSearchParams,
  ctx: DashboardContext,
  waiting: Parameters<typeof runAction>[3],
): Promise<void> {
  if (req.method === 'POST') return send(res, 200, await runAction(req, path, ctx, waiting));
  if (req.method !== 'GET') return send(res, 405, { error: 'GET, or POST for an action' });
  const page = pageOf(path);
  if (page) return page(res, ctx);
  // Who may act is this request's own answer: a reader who may not sees no button.
  if (path === '/api/config') return send(res, 200, { ...config(ctx.options), actions: await names(req, ctx.options.authorize, false) });
  const answer = await api(path, q, ctx);
  if (answer === undefined) return send(res, 404, { error: 'not found' });
  send(res, answer === null ? 404 : 200, answer ?? { error: 'no such stream or entry' });
}

/** The page and its assets; undefined for an API path. */
function pageOf(path: string): ((res: ServerResponse, ctx: DashboardContext) => void) | undefined {
  switch (path) {
    case '':
      return (res, ctx) => void res.writeHead(308, { location: `${ctx.options.basePath}/` }).end();
    case '/':
      return (res) => sendText(res, 'text/html; charset=utf-8', pageHtml());
    case '/app.js':
      return (res) => sendText(res, 'text/javascript; charset=utf-8', APP_SCRIPT);
    case '/app.css':
      return (res) => sendText(res, 'text/css; charset=utf-8', APP_CSS);
    case '/favicon.svg':
      return (res) => sendText(res, 'image/svg+xml', FAVICON_SVG);
    case '/favicon.ico':
      return (res) => void res.writeHead(204).end();
    default:
      return undefined;
  }
}

/** A GET of the JSON API: its answer, null for a missing stream or entry (404), undefined for no such call. */
async function api(path: string, q: URLSearchParams, ctx: DashboardContext): Promise<unknown> {
  const { data, options } = ctx;
  switch (path) {
    case '/api/consumer':
      return options.consumer ? consumerHealth(options.consumer) : null;
    case '/api/overview':
      return data.overview(count(q, 'page', 0, 1_000_000, 0));
    case '/api/dead-letter-streams':
      return data.deadLetterStreams(count(q, 'page', 0, 1_000_000, 0));
    case '/api/stream':
      return data.stream(await workStream(q, ctx));
    case '/api/schedules':
      return data.schedules(await workStream(q, ctx));
    case '/api/rate-limit': {
      const group = need(q, 'group');
      if (group.length > 1_000) throw new BadRequest('"group" takes at most 1,000 characters');
      return { limit: await data.rateLimit(await workStream(q, ctx), group) };
    }
    case '/api/pending':
      return data.pending(await workStream(q, ctx), need(q, 'group'), streamId(q, 'after'), count(q, 'count', 50, 500));
    case '/api/entries': {
      const field = q.get('field') ?? '';
      // A plain find costs about value × entry length inside Redis: a long value is no search anyone types.
      if (field.length > 1_000 || (q.get('value') ?? '').length > 200)
        throw new BadRequest('"field" takes at most 1,000 characters, "value" at most 200');
      return data.entries(await workStream(q, ctx), {
        count: count(q, 'count', 20, 200),
        ...optional('before', streamId(q, 'before')),
        ...optional('from', idBound(q, 'from')),
        ...optional('to', idBound(q, 'to')),
        ...(field ? { field, value: q.get('value') ?? '' } : {}),
      });
    }
    case '/api/entry': {
      const stream = deadLetterSourcesOf(q.get('key') ?? '').length > 0 ? await deadStream(q, ctx) : await workStream(q, ctx);
      return data.entry(stream, streamId(q, 'id', true), q.get('full') === '1' ? FULL_BYTES : PREVIEW_BYTES);
    }
    case '/api/entry-state':
      return data.entryState(await workStream(q, ctx), streamId(q, 'id', true));
    case '/api/delayed': {
      const after = delayedId(q, 'after', false);
      const afterDue = count(q, 'afterDue', 0, Number.MAX_SAFE_INTEGER, 0);
      return data.delayed(
        await workStream(q, ctx),
        after === undefined ? undefined : { id: after, dueAt: afterDue },
        count(q, 'count', 20, 100),
      );
    }
    case '/api/delayed-entry':
      return data.delayedEntry(await workStream(q, ctx), delayedId(q, 'id', true));
    case '/api/dead-letters': {
      const key = await deadStream(q, ctx);
      const n = count(q, 'count', 50, 500);
      const letters = await data.deadLetters(key, streamId(q, 'after'), n);
      // The filter applies to this page (one ranged read), never to a scan of the whole dead-letter stream.
      const reason = q.get('reason')?.toLowerCase();
      const shown = reason ? letters.filter((l) => l.error.toLowerCase().includes(reason)) : letters;
      const next = letters.length === n ? letters.at(-1)!.id! : null;
      return { key, length: await ctx.dlq.count(key), letters: shown, next };
    }
    default:
      return undefined;
  }
}

/** A delayed entry's id (what emit gave, or its idempotency key): any text of 1 to 1,000 characters. */
function delayedId(q: URLSearchParams, name: string, required: true): string;
function delayedId(q: URLSearchParams, name: string, required: false): string | undefined;
function delayedId(q: URLSearchParams, name: string, required: boolean): string | undefined {
  const value = q.get(name);
  if (value === null || value === '') {
    if (required) throw new BadRequest(`"${name}" is required`);
    return undefined;
  }
  if (value.length > 1_000) throw new BadRequest(`"${name}" takes at most 1,000 characters`);
  return value;
}

function optional<K extends string>(name: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [name]: value } as Record<K, string>);
}

/** An id range's bound: a stream id, or a time in ms (every id of that ms). */
function idBound(q: URLSearchParams, name: string): string | undefined {
  const value = q.get(name);
  if (value === null || value === '') return undefined;
  if (/^\d{1,16}$/.test(value) || isStreamId(value)) return value;
  throw new BadRequest(`"${name}" must be a stream id such as 1700000000000-0, or a time in ms`);
}

/** What /api/config answers (with `actions`: whether this visitor may act). */
export interface DashboardConfig {
  minIdleMs: number;
  pageSize: number;
  consumer: boolean;
  actions?: boolean;
}

function config(options: DashboardContext['options']): DashboardConfig {
  return { minIdleMs: options.minIdleMs, pageSize: options.pageSize, consumer: options.consumer !== undefined };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  // Answered already (a request past its deadline that finished after all).
  if (res.headersSent) return;
  res.writeHead(status, { ...HEADERS, 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

function sendText(res: ServerResponse, type: string, body: string): void {
  res.writeHead(200, { ...HEADERS, 'content-type': type }).end(body);
}

/**
 * The path as sent, still percent-encoded, as an app's router and a proxy compare it; null when it
 * has a dot segment, a double slash, a backslash or an encoded `/`, `\` or `.`, which routers do
 * not agree on (`/ops%2fapi` or `/x/../ops` must not reach what a guard on `/ops` protects).
 */
function rawPath(raw: string): string | null {
  const path = raw.split(/[?#]/)[0]!;
  return /(^|\/)\.{1,2}(\/|$)|\/\/|\\|%2f|%5c|%2e/i.test(path) ? null : path;
}

/** A call Redis gave no answer to (or the connection's handshake refused), as the failure itself says it (ioredis' "max retries per request" names an option, not the cause). */
function unansweredCause(err: unknown): string {
  if (isHandshakeRefusal(err)) return describeError(err);
  if (isCommandTimeout(err)) return 'no answer in time (Command timed out)';
  return isConnectionLoss(err) ? 'the connection is down' : describeError(err);
}

/** How long the page waits for the transport's own health() (its failure is the panel's, not the page's). */
const CONSUMER_HEALTH_MS = 2_000;

/** The call in progress, shared by every refresh until it settles: a hung health() is asked once, not once a second. */
const inFlight = new WeakMap<object, Promise<unknown>>();

async function consumerHealth(consumer: { health(): Promise<unknown> }): Promise<{ health: unknown } | { error: string }> {
  let call = inFlight.get(consumer);
  if (!call) {
    call = Promise.resolve().then(() => consumer.health());
    inFlight.set(consumer, call);
    void call.then(
      () => inFlight.delete(consumer),
      () => inFlight.delete(consumer),
    );
  }
  const late = Symbol('late');
  try {
    const health = await within(call, CONSUMER_HEALTH_MS, late);
    return health === late ? { error: `health() did not answer within ${CONSUMER_HEALTH_MS} ms` } : { health };
  } catch (err) {
    return { error: describeError(err) };
  }
}
