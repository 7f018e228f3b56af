import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeError } from '../describe-error.js';
import { DeadLetters } from '../dlq/dead-letters.js';
import type { RedisConnection } from '../redis/connect.js';
import { runAction, ActionRefused } from './dashboard-actions.js';
import { BadRequest, count, deadSource, deadStream, need, workStream, type DashboardContext } from './dashboard-keys.js';
import { DashboardData } from './dashboard-data.js';
import { resolveDashboardOptions, type DashboardOptions } from './dashboard-options.js';
import { APP_CSS, appScript, pageHtml } from './dashboard-page.js';

/** A Node request handler, Connect-style (Express and Fastify middleware both take it): `next` for paths that are not the dashboard's. */
export type DashboardHandler = (req: IncomingMessage, res: ServerResponse, next?: () => void) => void;

/** Longest value of an entry shown unless asked in full, and the most shown in full. */
const PREVIEW_CHARS = 2_000;
const FULL_CHARS = 1_000_000;

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
 */
export function createDashboardHandler(redis: RedisConnection, input: DashboardOptions = {}): DashboardHandler {
  const options = resolveDashboardOptions(input);
  const data = new DashboardData(redis, options);
  const dlq = new DeadLetters(redis);
  return (req, res, next) => {
    // originalUrl: Express strips a mount path from req.url.
    const url = new URL((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://dashboard.invalid');
    if (url.pathname !== options.basePath && !url.pathname.startsWith(`${options.basePath}/`)) {
      if (next) return next();
      return send(res, 404, { error: 'not found' });
    }
    const path = url.pathname.slice(options.basePath.length);
    route(req, res, path, url.searchParams, { data, dlq, options }).catch((err: unknown) => {
      if (err instanceof ActionRefused) return send(res, err.status, { error: err.message });
      if (err instanceof BadRequest) return send(res, 400, { error: err.message });
      // describeError masks credentials; the message is all a browser gets.
      send(res, 500, { error: describeError(err) });
    });
  };
}

async function route(req: IncomingMessage, res: ServerResponse, path: string, q: URLSearchParams, ctx: DashboardContext): Promise<void> {
  const { data, options } = ctx;
  if (req.method === 'POST') return send(res, 200, await runAction(req, path, ctx));
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { error: 'GET, or POST for an action' });
  switch (path) {
    case '':
      res.writeHead(308, { location: `${options.basePath}/` }).end();
      return;
    case '/':
      return sendText(res, 'text/html; charset=utf-8', pageHtml());
    case '/app.js':
      return sendText(res, 'text/javascript; charset=utf-8', appScript());
    case '/app.css':
      return sendText(res, 'text/css; charset=utf-8', APP_CSS);
    case '/favicon.ico':
      res.writeHead(204).end();
      return;
    case '/api/config':
      return send(res, 200, { actions: options.authorize !== undefined, minIdleMs: options.minIdleMs, pageSize: options.pageSize });
    case '/api/overview':
      return send(res, 200, await data.overview(count(q, 'page', 0, 1_000_000)));
    case '/api/stream': {
      const report = await data.stream(await workStream(q, ctx));
      return report ? send(res, 200, report) : send(res, 404, { error: 'no such stream' });
    }
    case '/api/pending':
      return send(
        res,
        200,
        await data.pending(await workStream(q, ctx), need(q, 'group'), q.get('after') ?? undefined, count(q, 'count', 50, 500)),
      );
    case '/api/entry': {
      const key = q.get('key') ?? '';
      const stream = deadSource(key) !== null ? await deadStream(q, ctx) : await workStream(q, ctx);
      const entry = await data.entry(stream, need(q, 'id'), q.get('full') === '1' ? FULL_CHARS : PREVIEW_CHARS);
      return entry ? send(res, 200, entry) : send(res, 404, { error: 'no such entry' });
    }
    case '/api/dead-letters': {
      const key = await deadStream(q, ctx);
      const reason = q.get('reason')?.toLowerCase();
      const n = count(q, 'count', 50, 500);
      const letters = await ctx.dlq.list(key, { count: n, after: q.get('after') ?? undefined });
      // The filter applies to this page (one XRANGE): never a scan of the whole dead-letter stream.
      const shown = reason ? letters.filter((l) => l.error.toLowerCase().includes(reason)) : letters;
      const next = letters.length === n ? (letters.at(-1)?.id ?? null) : null;
      return send(res, 200, { key, length: await ctx.dlq.count(key), letters: shown, next });
    }
    default:
      return send(res, 404, { error: 'not found' });
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, { ...HEADERS, 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
}

function sendText(res: ServerResponse, type: string, body: string): void {
  res.writeHead(200, { ...HEADERS, 'content-type': type }).end(body);
}
