import type { DeadLetterRetention, RetentionPolicy } from '../redis/retention.js';
import { InvalidOptionError, ownFields, positiveInt, rejectUnknown } from './validate.js';

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
