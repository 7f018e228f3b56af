import type { FeatureName } from '../redis/server-features.js';
/** What `server.health()` reports: the figures health checks decide on. */
export interface RedisStreamsHealth {
  /** `starting` until every reader's groups exist; `stopped` once `close()` began. */
  state: 'starting' | 'running' | 'stopped';
  group: string;
  consumer: string;
  /**
   * How long the transport has been unable to talk to Redis (a connection down, every call of a loop failing, or a
   * health check's PING or figures read left unanswered), in ms; 0 while it can.
   */
  redisDownForMs: number;
  streams: StreamHealth[];
  /**
   * Per handler pattern, its streams' lag and pending added up (a partitioned pattern's partitions, a
   * pattern's priority levels): one figure to autoscale on (docs/guide/autoscaling.md). Group-wide, like
   * the per-stream figures: every replica reports the same.
   */
  patterns: PatternHealth[];
  /** Age of the lag and pending figures, in ms; undefined when they were never read. */
  statsAgeMs: number | undefined;
  /** Why the figures are older than asked (Redis unreachable, XINFO refused). */
  statsError?: string;
  /** Redis answers but refuses a loop's calls (WRONGTYPE, NOPERM…): what it said. Not "unreachable": a restart cannot mend it. */
  loopError?: string;
  /**
   * The server, and the stream commands newer than Redis 7.0 this consumer uses on it (`claim-on-read`,
   * `ack-delete`, `idempotent-produce`; none with `newerCommands: false`), as found at the last start; absent before it.
   */
  server?: { name: string; features: FeatureName[] };
}

/** A handler pattern's figures: the sums of its streams' (see {@link StreamHealth}). */
export interface PatternHealth {
  /** The pattern as registered (`@StreamPattern('orders', …)`), without the key prefix. */
  pattern: string;
  /** How many stream keys it reads: its partitions, or its priority levels; 1 for a plain pattern. */
  streams: number;
  /** Entries of its streams not yet delivered to the group; null when any stream's lag is unknown (never a low guess). */
  lag: number | null;
  /** Entries delivered to the group and not yet acked, on all its streams; null when any is not read yet. */
  pending: number | null;
}

/** One stream this consumer reads. */
export interface StreamHealth {
  stream: string;
  /**
   * Entries of the stream not yet delivered to the group: counted (up to 100) after the group's
   * last-delivered id, so true whatever the server's `entries-read` says (a promoted Redis 7.0 replica
   * keeps a stale one); past 100 the server's figure. Null when unknown: not read yet, or more than
   * 100 to deliver and the server gives no figure, or a lower one (entries deleted past the group's last read, a group moved back by XGROUP SETID, or a promoted Redis 7.0 replica).
   */
  lag: number | null;
  /** Entries delivered to the group and not yet acked (all consumers); null when not read yet. */
  pending: number | null;
  /** Letters in the stream's dead-letter stream; null when not read yet, without one, or when it cannot be read (NOPERM, another type). */
  deadLetters: number | null;
  /** Entries this consumer has fetched and not yet settled. */
  inHand: number;
  /** Since the last successful step of the loop reading this stream, in ms; undefined before the first. */
  lastBeatAgeMs: number | undefined;
  /** The entry of this stream whose handler has run longest, and for how long (ms); absent while none runs. */
  oldestInHand?: { id: string; forMs: number };
  /** Entries of this stream whose handler has run longer than `stuckEntryMs`. */
  stuckEntries: number;
  /** An ordered pattern's stream (`@StreamPattern(p, { ordered: true })`): who owns it, and the keys waiting behind a failed entry. */
  ordering?: StreamOrdering;
  /**
   * The stream's pattern is paused for the group (docs/guide/flow-control.md): nothing new is read.
   * The consumer stays live and ready all the same: a pause is an operator's choice, not a fault.
   */
  paused?: true;
  /** Delayed entries waiting in the stream's schedule, by this consumer's last look (docs/guide/flow-control.md); absent while none waits. */
  delayed?: { waiting: number; nextDueInMs?: number };
}

/** What health shows of an ordered stream (docs/guide/ordering.md). */
export interface StreamOrdering {
  /** This consumer owns the partition now (reads and handles it). */
  owned: boolean;
  /** The owner as this consumer last saw it, `<epoch> <token> <consumer>` (the token: which process); '' when nobody owns it. */
  owner: string;
  /** Live members of the group sharing the partitions, as last seen. */
  members: number;
  /** Keys whose later entries wait here behind a failed one (at most 20, longest first), and how many in all. */
  blockedKeys: { key: string; id: string; waiting: number; forMs: number }[];
  blockedKeyCount: number;
  /** Entries held in the key queues: queued, running, or behind a failed entry. */
  held: number;
  /**
   * Its durable acks (`durableAcks`), while this consumer owns it: `confirmed`, `held` (the replicas did
   * not confirm: nothing starts until they do), `degraded` (they did not: carrying on without waiting),
   * `pending` (no wait answered yet); since when (Unix ms), and what the last wait confirmed.
   */
  durability?: StreamDurability;
}

/** What health shows of an ordered stream's durable acks. */
export interface StreamDurability {
  state: 'pending' | 'confirmed' | 'held' | 'degraded';
  since: number;
  /** Replicas asked for, and fsync. */
  replicas: number;
  fsync: boolean;
  whenUnconfirmed: 'hold' | 'carry-on';
  /** Replicas the last wait confirmed (null before the first). */
  confirmed: number | null;
  /** Why the last wait was refused, when it was. */
  refused?: string;
}

/**
 * Thresholds of {@link checkLiveness} and {@link checkReadiness}. The defaults fit Kubernetes: liveness
 * (which restarts the pod) fails only for what a restart cures; readiness (which takes it out of
 * rotation and holds a rolling deploy) fails while it cannot work. A Redis outage is cured by no
 * restart, and a backlog is the group's, not the pod's: neither is in liveness, and lag is not in
 * readiness unless asked for.
 */
export interface HealthThresholds {
  /**
   * Readiness: down once Redis has been unreachable this long (ms); default 30,000. Liveness: checked
   * only when given (a restart of every pod while Redis is down cures nothing).
   */
  redisDownMs?: number;
  /**
   * Down once a loop is stuck in one entry this long (ms): its handler has run that long and the
   * loop has not beaten since (a restart is the only cure for a handler that never settles; the
   * entry stays pending and runs again). Default 300,000.
   */
  stuckLoopMs?: number;
  /**
   * Readiness: down while any stream's lag is above this, or unknown (figures Redis refused, or none
   * read yet). Figures that cannot be read while Redis is unreachable are judged by `redisDownMs`. Default: not checked.
   */
  maxLag?: number;
  /** Readiness: down while any stream's pending count is above this (unknown: as `maxLag`). Default: not checked. */
  maxPending?: number;
}

export const DEFAULT_REDIS_DOWN_MS = 30_000;
export const DEFAULT_STUCK_LOOP_MS = 300_000;

export interface HealthVerdict {
  up: boolean;
  /** Why it is down. */
  reasons: string[];
}

/**
 * Live: started or starting, and no loop stuck in one entry for longer than `stuckLoopMs`; when
 * `redisDownMs` is given, also not cut off from Redis for longer than that.
 */
export function checkLiveness(health: RedisStreamsHealth, thresholds: HealthThresholds = {}): HealthVerdict {
  const reasons: string[] = [];
  const stuckLoopMs = thresholds.stuckLoopMs ?? DEFAULT_STUCK_LOOP_MS;
  if (health.state === 'stopped') reasons.push('the consumer is stopped');
  if (thresholds.redisDownMs !== undefined) reasons.push(...redisDown(health, thresholds.redisDownMs));
  for (const s of health.streams) {
    const oldest = s.oldestInHand;
    // Both: a long handler on a loop that still beats (other entries settle) is slow, not stuck.
    if (oldest && oldest.forMs > stuckLoopMs && (s.lastBeatAgeMs ?? Infinity) > stuckLoopMs)
      reasons.push(
        `stream "${s.stream}": loop stuck on entry ${oldest.id} of "${s.stream}", its handler running for ${oldest.forMs} ms (threshold ${stuckLoopMs} ms)`,
      );
  }
  return { up: reasons.length === 0, reasons };
}

/** Down once Redis has been unreachable longer than `thresholdMs`. */
const redisDown = (health: RedisStreamsHealth, thresholdMs: number): string[] =>
  health.redisDownForMs > thresholdMs ? [`Redis unreachable for ${health.redisDownForMs} ms (threshold ${thresholdMs} ms)`] : [];

/** Ready: live, started, Redis reachable (within `redisDownMs`) and answering, and every stream's lag and pending count within the thresholds set. */
export function checkReadiness(health: RedisStreamsHealth, thresholds: HealthThresholds = {}): HealthVerdict {
  const { reasons } = checkLiveness(health, { ...thresholds, redisDownMs: thresholds.redisDownMs ?? DEFAULT_REDIS_DOWN_MS });
  if (health.state === 'starting') reasons.push('the consumer is starting');
  if (health.loopError !== undefined) reasons.push(`Redis refuses the consumer's calls: ${health.loopError}`);
  const { maxLag, maxPending } = thresholds;
  for (const s of health.streams) {
    if (maxLag !== undefined && s.lag !== null && s.lag > maxLag) reasons.push(`stream "${s.stream}": lag ${s.lag} above ${maxLag}`);
    // More entries to deliver than are counted, and no usable figure from Redis: not known to be within maxLag.
    if (maxLag !== undefined && s.lag === null && health.statsAgeMs !== undefined) {
      reasons.push(
        `stream "${s.stream}": lag unknown (over 100 entries to deliver and Redis' own figure is missing or lower: entries deleted past the group's last read, a group moved back by XGROUP SETID, or a promoted Redis 7.0 replica)`,
      );
    }
    if (maxPending !== undefined && s.pending !== null && s.pending > maxPending)
      reasons.push(`stream "${s.stream}": pending ${s.pending} above ${maxPending}`);
  }
  // Figures that could not be read now are not trusted: the last ones may be long gone. Unless Redis is
  // unreachable: then the outage is what counts, down only past redisDownMs (its own reason above).
  if (
    (maxLag !== undefined || maxPending !== undefined) &&
    health.streams.length > 0 &&
    health.redisDownForMs === 0 &&
    (health.statsAgeMs === undefined || health.statsError !== undefined)
  ) {
    reasons.push(`lag and pending unknown${health.statsError ? `: ${health.statsError}` : ''}`);
  }
  return { up: reasons.length === 0, reasons };
}
