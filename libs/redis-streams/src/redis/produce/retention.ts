import type { DeadLetterRetention, RetentionPolicy } from '../../options/retention-options.js';

/** The `MINID` of a `maxAgeMs` bound; undefined when the clock has not run that long (nothing is that old). */
export function ageBoundId(maxAgeMs: number | undefined, now: number): string | undefined {
  return maxAgeMs === undefined || now - maxAgeMs <= 0 ? undefined : `${now - maxAgeMs}-0`;
}

/** `XADD` trim arguments of an unsafe policy (one bound only: `MAXLEN` and `MINID` exclude each other). */
export function xaddTrimArgs(policy: RetentionPolicy | undefined, now: number): (string | number)[] {
  if (!policy || policy.safe) return [];
  if (policy.maxAgeMs !== undefined && policy.maxLen === undefined) {
    const bound = ageBoundId(policy.maxAgeMs, now);
    return bound === undefined ? [] : ['MINID', '~', bound];
  }
  if (policy.maxLen !== undefined && policy.maxAgeMs === undefined) return ['MAXLEN', '~', policy.maxLen];
  return [];
}

/** The dead-letter script's trim arguments: `MAXLEN n`, `MINID <age in ms>` (the script takes the id from TIME), or none. */
export function deadLetterTrimArgs(policy: DeadLetterRetention | undefined): [string, string] {
  if (policy?.maxLen !== undefined) return ['MAXLEN', String(policy.maxLen)];
  if (policy?.maxAgeMs !== undefined) return ['MINID', String(policy.maxAgeMs)];
  return ['', ''];
}
