import { brandMark } from './brand.js';

/** The brand of `RetryLaterException` (see brand.ts), readable without loading Nest. */
const RETRY_LATER = brandMark('RetryLaterException');

/**
 * The delay a `RetryLaterException` or a core `RetryLaterError` (of either build; the error's own
 * `retryInMs`) asks for, also as the exception's error object comes out of Nest's RPC exception
 * filter (`{ retryInMs }`); undefined for any other error.
 */
export function retryLaterDelay(err: unknown): unknown {
  if (typeof err !== 'object' || err === null) return undefined;
  const marked = (err as Record<symbol, unknown>)[RETRY_LATER] === true;
  const error = marked ? (err as { getError(): unknown }).getError() : err;
  if (typeof error !== 'object' || error === null || !('retryInMs' in error)) return undefined;
  return (error as { retryInMs: unknown }).retryInMs;
}
