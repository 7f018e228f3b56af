import type { RetentionPolicy } from '../redis/retention.js';
import { InvalidOptionError, positiveInt, rejectUnknown } from './validate.js';

export function validateRetention(option: string, value: unknown): RetentionPolicy | undefined {
  if (value === undefined) return undefined;
  rejectUnknown(value as object, ['maxLen', 'maxAgeMs', 'safe'], `${option}.`);
  const policy = value as RetentionPolicy;
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
