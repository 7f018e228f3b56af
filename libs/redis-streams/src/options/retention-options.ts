import { InvalidOptionError, ownFields, positiveInt, rejectUnknown } from './validate.js';

/**
 * How much of a stream a producer keeps. Trimming happens on every `emit`/`send` to the stream.
 * Without `safe`, trimming is plain `XADD … MAXLEN ~` / `MINID ~`: it can delete entries a group
 * has not read or acked yet. With `safe`, it never removes an entry that any group still needs.
 */
export interface RetentionPolicy {
  /** Keep about this many entries (`MAXLEN ~`). */
  maxLen?: number;
  /** Keep entries younger than this (`MINID ~ <now - maxAgeMs>`). */
  maxAgeMs?: number;
  /** Never trim entries some group has not acked, nor entries no group has read yet (nothing while the stream has no group). Default: false. */
  safe?: boolean;
}

/**
 * How much of a dead-letter stream a consumer keeps, trimmed exactly as each letter is added (in the
 * script that moves it): the newest `maxLen` letters, or those younger than `maxAgeMs` by Redis' clock.
 * One bound: an `XADD` trims by one (and another command would need another ACL right).
 */
export type DeadLetterRetention = { maxLen: number; maxAgeMs?: undefined } | { maxAgeMs: number; maxLen?: undefined };

export function validateRetention(option: string, value: unknown): RetentionPolicy | undefined {
  if (value === undefined) return undefined;
  rejectUnknown(value as object, ['maxLen', 'maxAgeMs', 'safe'], `${option}.`);
  const policy = ownFields(value as object) as RetentionPolicy;
  if (policy.maxLen === undefined && policy.maxAgeMs === undefined) {
    throw new InvalidOptionError(option, 'set maxLen, maxAgeMs or both');
  }
  if (policy.safe !== undefined && typeof policy.safe !== 'boolean') throw new InvalidOptionError(`${option}.safe`, 'must be a boolean');
  return {
    ...(policy.maxLen !== undefined ? { maxLen: positiveInt(`${option}.maxLen`, policy.maxLen, 0) } : {}),
    ...(policy.maxAgeMs !== undefined ? { maxAgeMs: positiveInt(`${option}.maxAgeMs`, policy.maxAgeMs, 0) } : {}),
    safe: policy.safe ?? false,
  };
}

/** `deadLetterRetention`: `{ maxLen }` or `{ maxAgeMs }`, one of them. */
export function validateDeadLetterRetention(value: unknown): DeadLetterRetention | undefined {
  const option = 'deadLetterRetention';
  if (value === undefined) return undefined;
  rejectUnknown(value as object, ['maxLen', 'maxAgeMs'], `${option}.`);
  const { maxLen, maxAgeMs } = ownFields(value as object);
  if ((maxLen === undefined) === (maxAgeMs === undefined))
    throw new InvalidOptionError(option, 'set maxLen or maxAgeMs, one of them (an XADD trims by one bound)');
  return maxLen !== undefined
    ? { maxLen: positiveInt(`${option}.maxLen`, maxLen, 0) }
    : { maxAgeMs: positiveInt(`${option}.maxAgeMs`, maxAgeMs, 0) };
}
