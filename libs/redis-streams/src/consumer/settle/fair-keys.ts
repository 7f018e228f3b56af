import { decodeEntry } from '../../codec/entry-codec.js';
import { keyFromFunction, type KeyFunction } from '../../codec/key-function.js';
import { partitionKeyFieldOf } from '../../codec/ordering-key.js';
import { describeError } from '../../describe-error.js';
import type { Logger } from '../../ports.js';
import type { StreamEntry } from '../../stream-entry.js';

type Deserializer = Parameters<typeof decodeEntry>[1];

const THEN = 'the entry runs keyless';

/**
 * The fair-group key of each fetched entry (`fair.perKey`): its partition key, or what the key function
 * returns for its payload; undefined (the keyless group) for none. An entry whose key cannot be found (it
 * does not decode, the function throws or returns what is not a key) goes keyless, told once per reader:
 * its handler's settle then says what is wrong with it, as for any entry.
 */
export function fairKeysOf(
  perKey: true | KeyFunction,
  deserializer: Deserializer,
  d: { pattern: string; logger: Logger },
): (entries: readonly StreamEntry[]) => (string | undefined)[] | Promise<(string | undefined)[]> {
  if (perKey === true) return (entries) => entries.map((e) => partitionKeyFieldOf(e) || undefined);
  let told = false;
  const keyless = (entry: StreamEntry, err: unknown): undefined => {
    if (!told) {
      told = true;
      d.logger.warn(
        `fair.perKey of "${d.pattern}" found no key for entry ${entry.id} (${describeError(err)}): it runs with the keyless entries, not bound by inHand (told once per worker)`,
      );
    }
    return undefined;
  };
  const keyOf = (entry: StreamEntry): string | undefined | Promise<string | undefined> => {
    try {
      const decoded = decodeEntry(entry, deserializer);
      if (!(decoded instanceof Promise)) return keyFromFunction('fair.perKey', perKey, decoded, THEN);
      return decoded
        .then(
          (done) => keyFromFunction('fair.perKey', perKey, done, THEN),
          (err: unknown) => keyless(entry, err),
        )
        .catch((err: unknown) => keyless(entry, err));
    } catch (err) {
      return keyless(entry, err);
    }
  };
  return (entries) => {
    const keys = entries.map(keyOf);
    return keys.some((k) => k instanceof Promise) ? Promise.all(keys) : (keys as (string | undefined)[]);
  };
}
