import { brandMark } from './brand.js';
import { retryLaterDelay } from './retry-later-mark.js';

const MARKS = [brandMark('RateLimitedException'), brandMark('RateLimitedError')];

/**
 * The delay a `RateLimitedException` or a core `RateLimitedError` (of either build) asks for, also
 * as the exception's error object comes out of Nest's RPC exception filter (`{ retryInMs, rateLimited }`);
 * undefined for any other error.
 */
export function rateLimitedDelay(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return undefined;
  const marked = MARKS.some((mark) => (err as Record<symbol, unknown>)[mark] === true);
  if (!marked && (err as { rateLimited?: unknown }).rateLimited !== true) return undefined;
  return retryLaterDelay(err);
}
