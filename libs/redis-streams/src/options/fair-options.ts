import { InvalidOptionError, rejectUnknown, shown } from './validate.js';
import type { RateLimitKeyOf } from './rate-limit-options.js';

/** A fair group's key of an entry, from its payload and headers; none (undefined, null, '') puts the entry in the keyless group. */
export type FairKeyOf = RateLimitKeyOf;

/**
 * `@StreamPattern(p, { fair })`: at most `inHand` entries of one key in hand at once, by the whole
 * group, and the keys with entries waiting served round-robin, so that one key's backlog cannot
 * delay another key's entries (docs/guide/fair-groups.md).
 */
export interface FairGroups {
  /** Most entries of one key whose handler runs at once, across every worker of the group: 1 to 1,000. */
  inHand: number;
  /**
   * What an entry's key is: `true` (the default) its partition key (the record's `partitionKey`),
   * a function what it returns. Entries without a key share one keyless group, not limited to
   * `inHand`, which takes its turn like any key.
   */
  perKey?: true | FairKeyOf;
}

/** A fair group's `inHand` at most: each worker asks Redis for its keys' slots, one member each. */
export const MAX_FAIR_IN_HAND = 1000;

/** A pattern's `fair`, validated (each part named in the error); undefined when absent. */
export function resolveFair(option: string, value: unknown): Required<FairGroups> | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new InvalidOptionError(option, `must be { inHand, perKey? }, got ${shown(value)}`);
  rejectUnknown(value, ['inHand', 'perKey'], `${option}.`);
  const { inHand, perKey } = value as { inHand?: unknown; perKey?: unknown };
  if (typeof inHand !== 'number' || !Number.isInteger(inHand) || inHand < 1 || inHand > MAX_FAIR_IN_HAND)
    throw new InvalidOptionError(`${option}.inHand`, `must be a whole number from 1 to ${MAX_FAIR_IN_HAND}, got ${shown(inHand)}`);
  if (perKey !== undefined && perKey !== true && typeof perKey !== 'function')
    throw new InvalidOptionError(
      `${option}.perKey`,
      `must be true (the partition key) or a function (payload, headers) => key, got ${shown(perKey)}`,
    );
  return { inHand, perKey: (perKey ?? true) as true | FairKeyOf };
}
