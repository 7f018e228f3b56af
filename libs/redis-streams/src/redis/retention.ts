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

/**
 * How much of a dead-letter stream a consumer keeps, trimmed exactly as each letter is added (in the
 * script that moves it): the newest `maxLen` letters, or those younger than `maxAgeMs` by Redis' clock.
 * One bound: an `XADD` trims by one (and another command would need another ACL right).
 */
export type DeadLetterRetention = { maxLen: number; maxAgeMs?: undefined } | { maxAgeMs: number; maxLen?: undefined };

/** The dead-letter script's trim arguments: `MAXLEN n`, `MINID <age in ms>` (the script takes the id from TIME), or none. */
export function deadLetterTrimArgs(policy: DeadLetterRetention | undefined): [string, string] {
  if (policy?.maxLen !== undefined) return ['MAXLEN', String(policy.maxLen)];
  if (policy?.maxAgeMs !== undefined) return ['MINID', String(policy.maxAgeMs)];
  return ['', ''];
}
