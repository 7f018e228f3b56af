import type { DeadLetters } from '../dlq/dead-letters.js';
import type { DashboardData } from './dashboard-data.js';
import type { ResolvedDashboardOptions } from './dashboard-options.js';

/** What a request is served with. */
export interface DashboardContext {
  data: DashboardData;
  dlq: DeadLetters;
  options: ResolvedDashboardOptions;
}

/** A request the API cannot take (400): its message says why. */
export class BadRequest extends Error {}

export function need(q: URLSearchParams, name: string): string {
  const value = q.get(name);
  if (value === null || value === '') throw new BadRequest(`"${name}" is required`);
  return value;
}

export function count(q: URLSearchParams, name: string, fallback: number, max: number): number {
  const raw = q.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0 || n > max) throw new BadRequest(`"${name}" must be an integer from 0 to ${max}`);
  return n;
}

/** A stream with a consumer group: the only keys whose entries and PEL the dashboard shows. */
export async function workStream(q: URLSearchParams, ctx: DashboardContext): Promise<string> {
  const key = need(q, 'key');
  if (!(await ctx.data.hasGroups(key))) throw new BadRequest('not a stream with a consumer group');
  return key;
}

/** `orders:dead` → `orders`, `{orders}:dead` → `orders`; null for any other name. */
export function deadSource(key: string): string | null {
  const tagged = /^\{(.+)\}:dead$/.exec(key);
  if (tagged) return tagged[1]!;
  return key.endsWith(':dead') && key.length > 5 ? key.slice(0, -5) : null;
}

/** A dead-letter stream under the default names of a stream with a group: the only keys dead-letter pages and actions touch. */
export async function deadStream(q: URLSearchParams, ctx: DashboardContext): Promise<string> {
  const key = need(q, 'key');
  const source = deadSource(key);
  if (source === null || !(await ctx.data.hasGroups(source)))
    throw new BadRequest('not the dead-letter stream of a stream with a consumer group');
  return key;
}
