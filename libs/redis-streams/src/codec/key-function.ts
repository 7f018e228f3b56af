import { describeHandlerError } from '../describe-error.js';
import type { DecodedEntry } from './entry-codec.js';

/** A key function of the user's (`rateLimit.perKey`, `fair.perKey`): an entry's key from its payload and headers. */
export type KeyFunction = (payload: any, headers: Readonly<Record<string, string>>) => unknown;

/**
 * What a key function (`rateLimit.perKey`, `fair.perKey`) returns for an entry, as a key; undefined for none. Throws
 * what is not a key, saying what follows (`then`: the handler did not run, for a rate limit that fails the entry).
 */
export function keyFromFunction(
  option: string,
  keyOf: KeyFunction,
  decoded: DecodedEntry,
  then = 'the handler did not run',
): string | undefined {
  let key: unknown;
  try {
    key = keyOf(decoded.payload, decoded.headers);
  } catch (error) {
    throw new Error(`${option} threw: ${describeHandlerError(error)} (${then})`, { cause: error });
  }
  if (key === undefined || key === null || key === '') return undefined;
  if (typeof key === 'string') return key;
  if (typeof key === 'number' && Number.isFinite(key)) return String(key);
  throw new TypeError(
    `${option} returned ${typeof key === 'number' ? String(key) : typeof key}: a key is a string or a finite number (none: undefined, null or ''); ${then}`,
  );
}
