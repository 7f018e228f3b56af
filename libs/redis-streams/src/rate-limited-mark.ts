import { brandMark } from './brand.js';

const EXCEPTION = brandMark('RateLimitedException');
const ERROR = brandMark('RateLimitedError');

/**
 * The delay a `RateLimitedException` or a core `RateLimitedError` (of either build) asks for, also
 * as the exception's error object comes out of Nest's RPC exception filter (`{ retryInMs, rateLimited }`);
 * undefined for any other error.
 */
export function rateLimitedDelay(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return undefined;
  const marks = err as Record<symbol, unknown>;
  const error = marks[EXCEPTION] === true ? (err as { getError(): unknown }).getError() : err;
  if (typeof error !== 'object' || error === null) return undefined;
  const { rateLimited, retryInMs } = error as { rateLimited?: unknown; retryInMs?: unknown };
  return marks[ERROR] === true || rateLimited === true ? retryInMs : undefined;
}
