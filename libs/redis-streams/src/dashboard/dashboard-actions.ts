import type { IncomingMessage } from 'node:http';
import { safeJson } from '../escape-control.js';
import { BadRequest, deadStream, isStreamId, workStream, type DashboardContext } from './dashboard-keys.js';

import { counted } from '../readable.js';
import { PendingActionRefused } from '../ops/pending-actions.js';
import type { RedriveResult } from '../dlq/dead-letters.js';

const PENDING_ACTIONS = ['/api/pending/release', '/api/pending/dead-letter', '/api/pending/retry-now'];
const ACTIONS = [
  '/api/dead-letters/redrive',
  '/api/dead-letters/delete',
  '/api/pause',
  '/api/resume',
  '/api/schedules/remove',
  '/api/delayed/cancel',
  '/api/delayed/promote',
  ...PENDING_ACTIONS,
];

/** An action refused: 403 (read-only, cross-site, not authorized), 415, or 409 (a pending entry's move refused: `reason` says why). */
export class ActionRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** The header the page's script sends with every action: a cross-site form cannot set it, and a cross-site fetch that does is preflighted (and refused: no CORS here). */
export const ACTION_HEADER = 'x-requested-by';
export const ACTION_HEADER_VALUE = 'redis-streams-dashboard';

/** What the actions answer (the page's declarations, browser/api-replies.ts, are held to these by test/dashboard-replies.spec.ts). */
export interface LettersRedriven {
  results: RedriveResult[];
  /** Letters left, after a redrive of all. */
  remaining: number | undefined;
}
export interface LettersDeleted {
  deleted: string[];
}
export interface PauseChanged {
  changed: boolean;
}
/** A pending entry's move: its owner before it, and where a dead-lettered one went. */
export interface PendingMoved {
  owner: string;
  idleMs?: number;
  deadLetterStream?: string;
  deadLetterId?: string;
}
/** A schedule's removal: whether it existed. */
export interface ScheduleRemoved {
  removed: boolean;
}
/** A delayed entry cancelled or promoted: whether it still waited (and, promoted, whether this action moved it in, or why not). */
export interface DelayedChanged {
  /** It waited when asked (false: promoted, cancelled or never there: nothing done). */
  found: boolean;
  /** Promote: this action moved it into the stream (never true for a move someone else made). */
  moved?: boolean;
  /** Promote: its id in the stream, when moved. */
  newId?: string;
  /** Promote: why its stream did not take it (it still waits, due as before). */
  refused?: string;
  /** Promote: it left the schedule without a write ('repeat': its idempotency key was held by another write; 'no record'). */
  dropped?: 'repeat' | 'no record';
}
export type ActionAnswer = LettersRedriven | LettersDeleted | PauseChanged | PendingMoved | ScheduleRemoved | DelayedChanged;

/** Most ids one action names, and the largest body read. */
const MAX_IDS = 1000;
const MAX_BODY_BYTES = 256 * 1024;

/** A POST: checked (actions on, same origin, authorized), carried out, logged (who, what, which ids). */
export async function runAction(
  req: IncomingMessage,
  path: string,
  ctx: DashboardContext,
  // What the action waits for now: said if it is late (only once at 'redis' may it be carried out after a late answer).
  waiting: (what: 'the action guard' | "the request's body" | 'redis') => void = () => {},
): Promise<ActionAnswer> {
  const { options, dlq } = ctx;
  if (!ACTIONS.includes(path)) throw new ActionRefused(404, 'no such action');
  if (!options.authorize) throw new ActionRefused(403, 'read-only: actions are off (the dashboard was started without actions)');
  refuseCrossSite(req);
  waiting('the action guard');
  const who = await options.authorize(req);
  if (who === null || who === '') throw new ActionRefused(403, 'not authorized');
  waiting("the request's body");
  const body = await readJson(req);
  waiting('redis');
  if (path === '/api/pause' || path === '/api/resume') return pauseAction(path === '/api/pause', body, who, ctx);
  if (path === '/api/schedules/remove') return removeSchedule(body, who, ctx);
  if (path === '/api/delayed/cancel' || path === '/api/delayed/promote') return delayedAction(path.endsWith('/promote'), body, who, ctx);
  if (PENDING_ACTIONS.includes(path)) return pendingAction(path.slice('/api/pending/'.length), body, who, ctx);
  const q = new URLSearchParams({ key: typeof body.key === 'string' ? body.key : '' });
  const key = await deadStream(q, ctx);
  // "all": the oldest MAX_IDS letters, one bounded request at a time (the answer says how many are left).
  const all = body.ids === 'all' && path.endsWith('/redrive');
  const ids = all ? await ctx.data.deadLetterIds(key, MAX_IDS) : idsOf(body.ids);
  if (path.endsWith('/redrive')) {
    const results = ids.length === 0 ? [] : await dlq.redrive(key, ids);
    const moved = results.filter((r) => r.newId !== null);
    options.logger.log(
      `dashboard: ${safeJson(who)} redrove ${moved.length} of ${counted(ids.length, 'letter', 'letters')} of ${safeJson(key)}: ${moved.map((r) => r.id).join(', ') || 'none'}`,
    );
    return { results, remaining: all ? await dlq.count(key) : undefined };
  }
  const deleted = await dlq.delete(key, ids);
  options.logger.log(
    `dashboard: ${safeJson(who)} deleted ${counted(deleted.length, 'letter', 'letters')} of ${safeJson(key)}: ${deleted.join(', ') || 'none'}`,
  );
  return { deleted };
}

/** Pause or resume a stream's pattern for one of its groups. */
async function pauseAction(pause: boolean, body: Record<string, unknown>, who: string, ctx: DashboardContext): Promise<PauseChanged> {
  const key = await workStream(new URLSearchParams({ key: typeof body.key === 'string' ? body.key : '' }), ctx);
  const group = body.group;
  if (typeof group !== 'string' || group === '') throw new BadRequest('"group" must be the name of one of its groups');
  const changed = await ctx.data.setPaused(key, group, pause, `dashboard ${who}`);
  if (changed === 'no such group') throw new BadRequest('"group" must be the name of one of its groups');
  ctx.options.logger.log(
    `dashboard: ${safeJson(who)} ${pause ? 'paused' : 'resumed'} ${safeJson(key)} for group ${safeJson(group)}${changed ? '' : ' (it was already)'}`,
  );
  return { changed };
}

/** Removes one repeatable schedule of a stream (and its fire if one waits). */
async function removeSchedule(body: Record<string, unknown>, who: string, ctx: DashboardContext): Promise<ScheduleRemoved> {
  const key = await workStream(new URLSearchParams({ key: typeof body.key === 'string' ? body.key : '' }), ctx);
  const { id } = body;
  if (typeof id !== 'string' || id === '' || id.length > 200) throw new BadRequest('"id" must be the id of one of its schedules');
  const removed = await ctx.data.removeSchedule(key, id);
  ctx.options.logger.log(
    `dashboard: ${safeJson(who)} removed schedule ${safeJson(id)} of ${safeJson(key)}${removed ? '' : ' (there was none)'}`,
  );
  return { removed };
}

/** Cancels a delayed entry of a stream, or moves it in now. */
async function delayedAction(promote: boolean, body: Record<string, unknown>, who: string, ctx: DashboardContext): Promise<DelayedChanged> {
  const key = await workStream(new URLSearchParams({ key: typeof body.key === 'string' ? body.key : '' }), ctx);
  const { id } = body;
  if (typeof id !== 'string' || id === '' || id.length > 1_000) throw new BadRequest('"id" must be the id of one of its delayed entries');
  const done: DelayedChanged = promote
    ? await ctx.data.promoteDelayed(key, id).then((r) => (r === 'gone' ? { found: false } : { found: true, ...r }))
    : { found: await ctx.data.cancelDelayed(key, id) };
  const entry = `delayed entry ${safeJson(id)} of ${safeJson(key)}`;
  // "promoted" only when this call moved it: of parallel promotes (or one racing a worker) one alone did.
  const line = !done.found
    ? `${promote ? 'promoted' : 'cancelled'} nothing: ${entry} no longer waits`
    : !promote
      ? `cancelled ${entry}`
      : done.moved
        ? `promoted ${entry} into the stream as ${safeJson(done.newId)}`
        : done.dropped
          ? `dropped ${entry}: ${done.dropped === 'repeat' ? 'its idempotency key is held by another write' : 'it had no record'}`
          : `could not promote ${entry}${done.refused ? ` (${done.refused})` : ''}`;
  ctx.options.logger.log(`dashboard: ${safeJson(who)} ${line}`);
  return done;
}

/**
 * Release, dead-letter or retry-now of one pending entry (ops/pending-actions.ts): refused (409, with
 * its reason) while its owner is connected unless `force`, or when it changed hands meanwhile.
 */
async function pendingAction(what: string, body: Record<string, unknown>, who: string, ctx: DashboardContext): Promise<PendingMoved> {
  const stream = await workStream(new URLSearchParams({ key: typeof body.key === 'string' ? body.key : '' }), ctx);
  const { group, id } = body;
  if (typeof group !== 'string' || group === '') throw new BadRequest('"group" must be the name of one of its groups');
  if (typeof id !== 'string' || !isStreamId(id)) throw new BadRequest('"id" must be a stream id such as 1700000000000-0');
  for (const flag of ['force', 'empty'])
    if (body[flag] !== undefined && typeof body[flag] !== 'boolean') throw new BadRequest(`"${flag}" must be true or false`);
  // force: even while its owner is connected; empty: a dead letter even when the entry is gone from its stream (no fields).
  const force = body.force === true;
  const empty = body.empty === true;
  const target = { stream, group, id };
  const actions = ctx.pending;
  const { minIdleMs, logger } = ctx.options;
  const done = await (async (): Promise<PendingMoved> => {
    if (what === 'release') return { owner: (await actions.release(target, minIdleMs, force)).consumer, idleMs: minIdleMs };
    if (what === 'retry-now') return { owner: (await actions.retryNow(target, minIdleMs, force)).consumer, idleMs: minIdleMs };
    const moved = await actions.deadLetter(target, { force, forceGone: empty, by: `dashboard ${who}` });
    return { owner: moved.row.consumer, deadLetterStream: moved.deadLetterStream, deadLetterId: moved.deadLetterId };
  })().catch((err: unknown) => {
    if (err instanceof PendingActionRefused)
      throw new ActionRefused(
        409,
        err.message.replace('; add --force to write it anyway', '').replace('add --force', 'force it'),
        err.reason,
      );
    throw err;
  });
  const verb = { release: 'released', 'retry-now': 'made due now and released', 'dead-letter': 'dead-lettered' }[what];
  logger.log(
    `dashboard: ${safeJson(who)} ${verb} ${id} of ${safeJson(stream)} in group ${safeJson(group)} (owner ${safeJson(done.owner)}${force ? ', forced' : ''})`,
  );
  return done;
}

/** Same origin only: the page's header, JSON, and an Origin (when the browser sends one) naming this host. */
function refuseCrossSite(req: IncomingMessage): void {
  if (req.headers[ACTION_HEADER] !== ACTION_HEADER_VALUE)
    throw new ActionRefused(403, `cross-site request refused: no ${ACTION_HEADER} header`);
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) throw new ActionRefused(415, 'an action takes application/json');
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') throw new ActionRefused(403, `cross-site request refused (${site})`);
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      throw new ActionRefused(403, 'cross-site request refused: bad Origin');
    }
    if (host !== req.headers.host) throw new ActionRefused(403, 'cross-site request refused: Origin is another site');
  } else if (origin === 'null') throw new ActionRefused(403, 'cross-site request refused: opaque Origin');
}

function idsOf(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_IDS)
    throw new BadRequest(`"ids" must be a list of 1 to ${MAX_IDS} dead-letter ids${' (or "all" to redrive every one)'}`);
  for (const id of value)
    if (typeof id !== 'string' || !isStreamId(id)) throw new BadRequest('"ids" must be stream ids such as 1700000000000-0');
  return value as string[];
}

/** The body as JSON: a body parser may have read it already (Express with express.json()), else it is read here. */
async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const parsed = (req as { body?: unknown }).body;
  // An array (express.json() takes one) is no action: refused below like any other shape.
  if (parsed !== undefined && typeof parsed === 'object' && parsed !== null && !Buffer.isBuffer(parsed)) {
    if (Array.isArray(parsed) || Object.keys(parsed).length === 0) throw new BadRequest('the body must be a JSON object');
    return parsed as Record<string, unknown>;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BadRequest('body too large');
    chunks.push(chunk);
  }
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // below
  }
  throw new BadRequest('the body must be a JSON object');
}
