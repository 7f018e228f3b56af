import type { OrderingView } from '../consumer/tenure/ordering-view.js';
import type { DelayedView } from '../consumer/upkeep/delayed-promoter.js';
import type { StreamOrdering } from './health.js';
import { featureList, type ServerFeatures } from '../redis/server-features.js';
import type { LoopVitals } from '../consumer/watch/loop-vitals.js';
import { describeError } from '../describe-error.js';
import { isUnanswered } from '../redis/replies/redis-errors.js';
import type { StreamCommands } from '../redis/stream-commands.js';
import { within } from '../within.js';
import { GroupStats } from './group-stats.js';
import { patternFigures } from './pattern-figures.js';
import type { RedisStreamsHealth, StreamHealth } from './health.js';

/** How long a health check waits for XINFO GROUPS before answering with the figures it has. */
const STATS_WITHIN_MS = 1000;
/** How long a health check waits for its PING: below Kubernetes' default probe timeout (1 s). */
const PING_WITHIN_MS = 250;
/** A Redis reply this recent (a beat of the loop, a PING) needs no new PING. */
const FRESH_REPLY_MS = 1000;

export interface HealthProbeDeps {
  group: string;
  consumer: string;
  streams: readonly string[];
  /** The handler pattern a stream key belongs to (its partitions' and priority levels' too). */
  patternOf: (stream: string) => string | undefined;
  commands: StreamCommands;
  /** A stream's dead-letter stream; undefined when entries are never dead-lettered. */
  deadLetterKey: (stream: string) => string | undefined;
  /** Each reader's streams and how its loop is doing. */
  readers: () => {
    streams: readonly string[];
    vitals: LoopVitals;
    features: ServerFeatures | undefined;
    ordering?: OrderingView | undefined;
    delayed?: (stream: string) => DelayedView | undefined;
    paused?: (stream: string) => boolean;
  }[];
  state: () => RedisStreamsHealth['state'];
}

/** A stream's running handlers as the snapshot shows them. */
function handlersOf(vitals: LoopVitals, stream: string): Pick<StreamHealth, 'oldestInHand' | 'stuckEntries'> {
  const handlers = vitals.handlers.get(stream);
  if (!handlers) return { stuckEntries: 0 };
  return { oldestInHand: { id: handlers.oldest.id, forMs: handlers.oldest.forMs }, stuckEntries: handlers.stuck };
}

/**
 * Builds what `server.health()` reports. "Redis unreachable" starts at the earliest of: a
 * connection not ready, every call of a loop failing, or a PING of this probe left unanswered
 * (a frozen server or a network black hole keeps the connection open and answers nothing: the
 * loop alone would notice only when its park times out).
 */
export class HealthProbe {
  readonly stats: GroupStats;
  private lanesDownSince: number | undefined;
  /** Since when a PING of this probe has gone unanswered; undefined once one is answered. */
  private silentSince: number | undefined;
  private lastReplyAt = 0;
  private pinging: Promise<boolean> | undefined;

  constructor(private readonly d: HealthProbeDeps) {
    this.stats = new GroupStats(d.streams, async (stream) => {
      const dead = d.deadLetterKey(stream);
      const [figures, deadLetters] = await Promise.all([
        d.commands.groupInfo(stream),
        dead === undefined ? null : d.commands.deadLetterCount(dead),
      ]);
      return { figures, deadLetters };
    });
  }

  /** The connections' state, as the server's status reports it. */
  lanesReady(ready: boolean): void {
    if (ready) this.lanesDownSince = undefined;
    else this.lanesDownSince ??= Date.now();
  }

  async snapshot(options: { maxStatsAgeMs?: number; stats?: boolean }): Promise<RedisStreamsHealth> {
    const state = this.d.state();
    let readers = this.d.readers();
    const lastBeat = Math.max(0, ...readers.map((r) => r.vitals.lastBeatAt ?? 0));
    if (state !== 'stopped' && this.lanesDownSince === undefined) await this.ping(lastBeat);
    let statsError: string | undefined;
    if (options.stats !== false && state !== 'stopped') statsError = await this.readStats(options.maxStatsAgeMs ?? 1000);
    readers = this.d.readers();
    const now = Date.now();
    const downSince = Math.min(
      this.lanesDownSince ?? Infinity,
      this.silentSince ?? Infinity,
      ...readers.map((r) => r.vitals.failingSince ?? Infinity),
    );
    const loopError = readers.map((r) => r.vitals.refusal).find((r) => r !== undefined);
    const features = readers.map((r) => r.features).find((f) => f !== undefined);
    const latest = this.stats.latest();
    const figures = new Map(latest?.stats.map((s) => [s.stream, s]));
    const streams: StreamHealth[] = readers.flatMap(({ streams, vitals, ordering, delayed, paused }) =>
      streams.map((stream) => ({
        stream,
        lag: figures.get(stream)?.lag ?? null,
        pending: figures.get(stream)?.pending ?? null,
        deadLetters: figures.get(stream)?.deadLetters ?? null,
        inHand: vitals.inHand.get(stream) ?? 0,
        lastBeatAgeMs: vitals.lastBeatAt === undefined ? undefined : Math.max(0, now - vitals.lastBeatAt),
        ...handlersOf(vitals, stream),
        ...(ordering ? { ordering: orderingOf(ordering) } : {}),
        ...delayedOf(delayed?.(stream)),
        ...(paused?.(stream) ? { paused: true } : {}),
      })),
    );
    return {
      state,
      group: this.d.group,
      consumer: this.d.consumer,
      // At least 1 while down: 0 says Redis can be reached.
      redisDownForMs: Number.isFinite(downSince) ? Math.max(1, now - downSince) : 0,
      streams,
      patterns: patternFigures(streams, this.d.patternOf),
      statsAgeMs: latest ? Math.max(0, now - latest.at) : undefined,
      ...(statsError ? { statsError } : {}),
      ...(loopError ? { loopError } : {}),
      ...(features ? { server: { name: features.server, features: featureList(features) } } : {}),
    };
  }

  /** A PING when Redis has not been heard from for a second; unanswered within PING_WITHIN_MS, Redis counts as silent since it was sent. */
  private async ping(lastBeat: number): Promise<void> {
    if (this.silentSince === undefined && Date.now() - Math.max(lastBeat, this.lastReplyAt) < FRESH_REPLY_MS) return;
    const sentAt = Date.now();
    this.pinging ??= this.d.commands
      .ping()
      .then(
        () => {
          this.lastReplyAt = Date.now();
          this.silentSince = undefined;
          return true;
        },
        () => false,
      )
      .finally(() => (this.pinging = undefined));
    if (!(await within(this.pinging, PING_WITHIN_MS, false))) this.silentSince ??= sentAt;
  }

  /**
   * Refreshes the lag and pending figures; says why when they could not be. A read left unanswered
   * (no reply within STATS_WITHIN_MS, a connection down) is Redis silent since it was sent, as an
   * unanswered PING is: the outage, not the figures, is then what readiness judges (by redisDownMs).
   */
  private async readStats(maxAgeMs: number): Promise<string | undefined> {
    if (this.lanesDownSince !== undefined || this.silentSince !== undefined) return 'Redis unreachable';
    const sentAt = Date.now();
    const late = `no answer to XINFO GROUPS within ${STATS_WITHIN_MS} ms`;
    const error = await within(
      this.stats.get(maxAgeMs).then(
        () => undefined,
        (err: unknown) => (isUnanswered(err) ? 'Redis unreachable' : describeError(err)),
      ),
      STATS_WITHIN_MS,
      late,
    );
    if (error === late || error === 'Redis unreachable') this.silentSince ??= sentAt;
    return error;
  }
}

/** Most blocked keys health lists per stream (the count says how many in all). */
const BLOCKED_KEYS_SHOWN = 20;

/** What waits in the stream's schedule, shown once some did (a stream never scheduled to shows nothing). */
function delayedOf(view: DelayedView | undefined): Pick<StreamHealth, 'delayed'> {
  if (!view || (view.waiting === 0 && view.nextDueInMs === undefined)) return {};
  return { delayed: { waiting: view.waiting, ...(view.nextDueInMs === undefined ? {} : { nextDueInMs: view.nextDueInMs }) } };
}

function orderingOf(view: OrderingView): StreamOrdering {
  return {
    owned: view.owned,
    owner: view.owner,
    members: view.members,
    blockedKeys: view.blockedKeys.slice(0, BLOCKED_KEYS_SHOWN),
    blockedKeyCount: view.blockedKeys.length,
    held: view.held,
    ...(view.durability && view.owned
      ? {
          durability: {
            state: view.durability.state,
            since: view.durability.since,
            replicas: view.durability.wanted.replicas,
            fsync: view.durability.wanted.fsync,
            whenUnconfirmed: view.durability.wanted.whenUnconfirmed,
            confirmed: view.durability.last?.replicas ?? null,
            ...(view.durability.last?.refused ? { refused: view.durability.last.refused } : {}),
          },
        }
      : {}),
  };
}
