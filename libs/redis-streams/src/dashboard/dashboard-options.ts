import type { IncomingMessage } from 'node:http';
import { guardLog } from '../guarded-logger.js';
import type { RedisStreamsHealth } from '../health/health.js';
import { atMost, InvalidOptionError, nonEmpty, positiveInt, rejectUnknown, string, withMethod } from '../options/validate.js';
import { RING_BYTES, SLOT_BYTES } from './figure-history.js';

/** Who may act: a name for the action log, or null to refuse (403). */
export type DashboardAuthorize = (req: IncomingMessage) => string | null | Promise<string | null>;

export interface DashboardOptions {
  /** The path the dashboard is served under, e.g. `/dashboard`. Default: `''` (the root). */
  basePath?: string;
  /** Which streams: a SCAN MATCH pattern. Default `*` (every stream with a consumer group). */
  match?: string;
  /** The workers' `minIdleMs`, for "reclaimable in" and what needs attention. Default 30000 (the server's default). */
  minIdleMs?: number;
  /** Streams per overview page. Default 200. */
  pageSize?: number;
  /** Redrive and delete of dead letters. Off (read-only) unless given: `authorize` says who acts, or null to refuse. */
  actions?: { authorize: DashboardAuthorize };
  /**
   * Who may read: every page, asset and call (actions too) under `basePath` goes through `authorize`
   * first, and null refuses it (403). Default: anyone who reaches it (the standalone server keeps to loopback).
   */
  read?: { authorize: DashboardAuthorize };
  /** Where each action is logged (who, what, which ids). Default: the console. */
  logger?: { log(message: string): void };
  /**
   * The `Host` values it answers (`name:port`, lower case); any other gets 421, so that a page of
   * another site whose name resolves to this address (DNS rebinding) cannot read it. Default: any
   * (in a Nest app, the app's own concern); the standalone server answers its own addresses and these.
   */
  allowedHosts?: string[];
  /** A call Redis has not answered within this many ms gets 503 (a frozen Redis must not hold the page). Default 10000. */
  requestTimeoutMs?: number;
  /** The transport running beside it (a `RedisStreamsServer`): the page shows that consumer's own health too. */
  consumer?: { health(): Promise<RedisStreamsHealth> };
  /**
   * The charts' past, kept in this process (docs/guide/dashboard.md, "Charts"): every `intervalMs` (default
   * 15000) the lag, pending, dead letters and counters of the first `streams` streams in scope (default 1000,
   * by name) for the last `keepMs` (default 3600000), in one ring per stream (36 bytes a slot and about 1 KB a ring: about 9.7 KB a
   * stream by default). `false`: none (charts show what the tab has seen).
   */
  history?: false | { intervalMs?: number; keepMs?: number; streams?: number };
}

export interface ResolvedDashboardOptions {
  basePath: string;
  match: string;
  minIdleMs: number;
  pageSize: number;
  authorize: DashboardAuthorize | undefined;
  authorizeRead: DashboardAuthorize | undefined;
  logger: { log(message: string): void };
  allowedHosts: string[] | undefined;
  requestTimeoutMs: number;
  consumer: { health(): Promise<RedisStreamsHealth> } | undefined;
  history: { intervalMs: number; keepMs: number; streams: number } | null;
}

export const DASHBOARD_DEFAULTS = {
  basePath: '',
  match: '*',
  minIdleMs: 30_000,
  pageSize: 200,
  requestTimeoutMs: 10_000,
  history: { intervalMs: 15_000, keepMs: 3_600_000, streams: 1_000 },
} as const;

/** Slots a stream's history ring may have (keepMs / intervalMs), and streams it may keep: its memory stays bounded. */
const MAX_HISTORY_SLOTS = 10_000;
const MAX_HISTORY_STREAMS = 100_000;
/** What the rings may take together (streams × (slots × SLOT_BYTES + RING_BYTES)): each bound alone allowed 36 GB. */
const MAX_HISTORY_BYTES = 256 * 1024 * 1024;

const KNOWN = [
  'basePath',
  'match',
  'minIdleMs',
  'pageSize',
  'actions',
  'read',
  'logger',
  'allowedHosts',
  'requestTimeoutMs',
  'consumer',
  'history',
] as const;

/** Options checked, each error naming the option (`dashboard.basePath`, …). */
export function resolveDashboardOptions(input: DashboardOptions = {}): ResolvedDashboardOptions {
  rejectUnknown(input, KNOWN, 'dashboard.');
  const basePath = string('dashboard.basePath', input.basePath, DASHBOARD_DEFAULTS.basePath).replace(/\/+$/, '');
  if (basePath !== '' && !/^\/[\w\-./~]*$/.test(basePath))
    throw new InvalidOptionError('dashboard.basePath', `must be a path such as "/dashboard", got ${JSON.stringify(input.basePath)}`);
  const actions = input.actions;
  if (actions !== undefined && (typeof actions !== 'object' || actions === null || typeof actions.authorize !== 'function'))
    throw new InvalidOptionError('dashboard.actions', 'must be { authorize(req) }: who may redrive and delete (return null to refuse)');
  const read = input.read;
  if (read !== undefined && (typeof read !== 'object' || read === null || typeof read.authorize !== 'function'))
    throw new InvalidOptionError('dashboard.read', 'must be { authorize(req) }: who may read the dashboard (return null to refuse)');
  return {
    basePath,
    match: nonEmpty('dashboard.match', input.match, DASHBOARD_DEFAULTS.match),
    minIdleMs: positiveInt('dashboard.minIdleMs', input.minIdleMs, DASHBOARD_DEFAULTS.minIdleMs),
    pageSize: atMost('dashboard.pageSize', positiveInt('dashboard.pageSize', input.pageSize, DASHBOARD_DEFAULTS.pageSize), 1000),
    authorize: actions?.authorize,
    authorizeRead: read?.authorize,
    // An audit logger that throws must not turn an action that was done into a 500 (its line goes to stderr).
    logger: guardLog(withMethod('dashboard.logger', input.logger, 'log', { log: (message: string) => console.log(message) })),
    allowedHosts: hostsOf(input.allowedHosts),
    consumer: withMethod('dashboard.consumer', input.consumer, 'health', undefined),
    requestTimeoutMs: positiveInt('dashboard.requestTimeoutMs', input.requestTimeoutMs, DASHBOARD_DEFAULTS.requestTimeoutMs),
    history: historyOf(input.history),
  };
}

function historyOf(value: unknown): ResolvedDashboardOptions['history'] {
  if (value === false) return null;
  if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value)))
    throw new InvalidOptionError('dashboard.history', 'must be false or { intervalMs, keepMs, streams }');
  const given = (value ?? {}) as { intervalMs?: unknown; keepMs?: unknown; streams?: unknown };
  rejectUnknown(given, ['intervalMs', 'keepMs', 'streams'], 'dashboard.history.');
  const d = DASHBOARD_DEFAULTS.history;
  const intervalMs = positiveInt('dashboard.history.intervalMs', given.intervalMs, d.intervalMs);
  const keepMs = positiveInt('dashboard.history.keepMs', given.keepMs, d.keepMs);
  if (keepMs < intervalMs)
    throw new InvalidOptionError('dashboard.history.keepMs', `must be at least intervalMs (${intervalMs}), got ${keepMs}`);
  if (keepMs / intervalMs > MAX_HISTORY_SLOTS)
    throw new InvalidOptionError(
      'dashboard.history.keepMs',
      `keeps at most ${MAX_HISTORY_SLOTS} intervals (keepMs / intervalMs): ${keepMs} / ${intervalMs} is more`,
    );
  const streams = atMost(
    'dashboard.history.streams',
    positiveInt('dashboard.history.streams', given.streams, d.streams),
    MAX_HISTORY_STREAMS,
  );
  const bytes = streams * ((Math.ceil(keepMs / intervalMs) + 1) * SLOT_BYTES + RING_BYTES);
  if (bytes > MAX_HISTORY_BYTES)
    throw new InvalidOptionError(
      'dashboard.history',
      `its rings would take ${bytes.toLocaleString('en-US')} bytes (streams × ((keepMs / intervalMs + 1) × ${SLOT_BYTES} + ${RING_BYTES}), names aside), at most ${MAX_HISTORY_BYTES.toLocaleString('en-US')} (256 MiB): keep fewer streams, or a shorter or coarser history`,
    );
  return { intervalMs, keepMs, streams };
}

function hostsOf(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || !value.every((h) => typeof h === 'string' && h !== ''))
    throw new InvalidOptionError('dashboard.allowedHosts', 'must be a non-empty list of host:port names');
  return value.map((h: string) => h.toLowerCase());
}
