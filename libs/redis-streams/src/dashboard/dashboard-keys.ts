import type { DeadLetters } from '../dlq/dead-letters.js';
import type { PendingActions } from '../ops/pending-actions.js';
import { deadLetterSourcesOf } from '../key-names.js';
import type { DashboardData } from './dashboard-data.js';
import type { ResolvedDashboardOptions } from './dashboard-options.js';

/** What a request is served with. */
export interface DashboardContext {
  data: DashboardData;
  dlq: DeadLetters;
  /** An operator's moves of one pending entry. */
  pending: PendingActions;
  options: ResolvedDashboardOptions;
}

/** A request the API cannot take (400): its message says why. */
export class BadRequest extends Error {}

export function need(q: URLSearchParams, name: string): string {
  const value = q.get(name);
  if (value === null || value === '') throw new BadRequest(`"${name}" is required`);
  return value;
}

export function count(q: URLSearchParams, name: string, fallback: number, max: number, min = 1): number {
  const raw = q.get(name);
  if (raw === null) return fallback;
  const n = /^\d{1,16}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new BadRequest(`"${name}" must be an integer from ${min} to ${max}`);
  return n;
}

/** A stream with a consumer group: the only keys whose entries and PEL the dashboard shows. */
export async function workStream(q: URLSearchParams, ctx: DashboardContext): Promise<string> {
  const key = need(q, 'key');
  if (!ctx.data.inScope(key) || !(await ctx.data.hasGroups(key)))
    throw new BadRequest('not a stream with a consumer group that this dashboard shows');
  return key;
}

/** A dead-letter stream under the default names of a stream with a group: the only keys dead-letter pages and actions touch. */
export async function deadStream(q: URLSearchParams, ctx: DashboardContext): Promise<string> {
  const key = need(q, 'key');
  for (const source of deadLetterSourcesOf(key)) if (ctx.data.inScope(source) && (await ctx.data.hasGroups(source))) return key;
  throw new BadRequest('not the dead-letter stream of a stream with a consumer group');
}

const STREAM_ID = /^\d{1,20}-\d{1,20}$/;
const MAX_U64 = 2n ** 64n - 1n;

/** Whether `value` is a stream id (`ms-seq`, each part at most 2^64 - 1). */
export function isStreamId(value: string): boolean {
  if (!STREAM_ID.test(value)) return false;
  const [ms, seq] = value.split('-');
  return BigInt(ms!) <= MAX_U64 && BigInt(seq!) <= MAX_U64;
}

/** A stream id parameter (`1700000000000-0`); undefined when absent and not required. */
export function streamId(q: URLSearchParams, name: string, required: true): string;
export function streamId(q: URLSearchParams, name: string, required?: false): string | undefined;
export function streamId(q: URLSearchParams, name: string, required = false): string | undefined {
  const value = q.get(name);
  if (value === null || value === '') {
    if (required) throw new BadRequest(`"${name}" is required`);
    return undefined;
  }
  if (!isStreamId(value)) throw new BadRequest(`"${name}" must be a stream id such as 1700000000000-0`);
  return value;
}
