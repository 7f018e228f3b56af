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
