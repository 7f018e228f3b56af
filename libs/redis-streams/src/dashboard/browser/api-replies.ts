/* What the page reads of the dashboard's JSON API (dashboard-http.ts): only the fields it shows. The
 * server's own types are checked against these (test/dashboard-replies.spec.ts); this folder cannot
 * import them, as they bring Node's types with them. */

export interface ConfigReply {
  /** Whether this visitor may act (the server asked the action guard for this request). */
  actions: boolean;
  /** A transport runs beside the dashboard (in-app): its health is shown. */
  consumer: boolean;
  minIdleMs: number;
}

export interface ConsumerRow {
  name: string;
  pending: number;
  idleMs: number;
  inactiveMs: number | null;
  oldestPendingId: string | null;
  oldestPendingIdleMs: number | null;
  /** A connection of this library's is open for it; null: CLIENT LIST refused. */
  connected: boolean | null;
}

/** An ordered partition's durable acks, as its owner last said (AckDurability). */
export interface Durability {
  state: string;
  since: number;
  confirmed: number | null;
  replicas: number;
  fsync: boolean;
  refused?: string;
}

export interface GroupRow {
  name: string;
  pending: number;
  lastDeliveredId: string;
  lag: number | null;
  lagMs: number | null;
  firstUndeliveredId: string | null;
  oldestPending: { id: string } | null;
  consumers: ConsumerRow[];
  consumerCount: number;
  consumedPerSec: number | null;
  retries: { waiting: number; due: number } | { error: string };
  ordering: {
    consumer: string | null;
    epoch: number | null;
    leaseMs: number | null;
    members: number;
    durability: Durability | null;
  } | null;
  paused: { at: number | null; by: string } | null;
}

export interface DeadLetterFigure {
  stream: string;
  /** null: the key holds another type. */
  length: number | null;
}

export interface Idempotency {
  windowSec: number;
  maxKeys: number;
  pidsTracked: number;
  iidsTracked: number;
  iidsAdded: number;
  iidsDuplicates: number;
}

export type Delayed = { waiting: number; nextDueInMs: number | null; orphaned?: number } | { error: string };

export interface StreamRow {
  stream: string;
  length: number;
  lastGeneratedId: string;
  firstEntryId: string | null;
  idempotency: Idempotency | null;
  groups: GroupRow[];
  deadLetters: DeadLetterFigure[];
  producedPerSec: number | null;
  /** Produced per second at each of the server's last refreshes. */
  producedHistory: number[];
  /** On a cluster, the master that serves it; null on one node. */
  node: string | null;
  delayed: Delayed;
  /** The stream page: its figures over the server's kept past (null: none kept). */
  history?: HistorySeries | null;
}

/** The charts' past, kept by the server (figure-history.ts): times (Unix ms) and each figure at each. */
export interface HistorySeries {
  at: number[];
  lag: (number | null)[];
  pending: (number | null)[];
  dead: (number | null)[];
  produced: (number | null)[];
  consumed: (number | null)[];
}

export interface AttentionItem {
  text: string;
  page: 'stream' | 'dead' | 'entry';
  key: string;
  group?: string;
  id?: string;
}

export interface OverviewReply {
  streams: StreamRow[];
  total: number;
  page: number;
  pageSize: number;
  attentionItems: AttentionItem[];
  server: string;
  /** This page's streams' figures over the server's kept past, summed (null: none kept). */
  history: HistorySeries | null;
}

export interface PendingRow {
  id: string;
  consumer: string;
  idleMs: number;
  deliveries: number;
  reclaimableInMs: number;
  state: string;
  retryInMs: number | null;
}

export interface PendingReply {
  entries: PendingRow[];
  next: string | null;
}

export interface EntryRow {
  id: string;
  fields: [string, string][];
}

export interface EntriesReply {
  entries: EntryRow[];
  next: string | null;
  read: number;
  window: number;
}

export interface EntryReply {
  stream: string;
  id: string;
  fields: [string, string][];
  /** Each field's and value's full size in bytes, beside the (maybe cut) value shown. */
  sizes: [number, number][];
  fieldCount: number;
  truncated: boolean;
}

export interface LetterRow {
  id: string;
  stream: string;
  sourceId: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  error: string;
  errorTruncated: boolean;
  stack?: string;
  stackTruncated: boolean;
  deadAt: number;
  fieldsBytes: number;
}

export interface DeadLettersReply {
  length: number;
  letters: LetterRow[];
  next: string | null;
}

export interface DeadLetterStreamsReply {
  streams: DeadLetterFigure[];
}

/** An ordered stream this app's consumer reads (its health). */
export interface ConsumerOrdering {
  owned: boolean;
  owner: string;
  blockedKeys: { key: string; id: string; waiting: number; forMs: number }[];
  blockedKeyCount: number;
}

/** The transport's own health(), as the consumer panel shows it. */
export interface ConsumerHealth {
  state: string;
  group: string;
  consumer: string;
  redisDownForMs: number;
  loopError?: string;
  streams: {
    stream: string;
    lag: number | null;
    pending: number | null;
    inHand: number;
    lastBeatAgeMs?: number | undefined;
    ordering?: ConsumerOrdering;
  }[];
}

export type ConsumerReply = { health: ConsumerHealth } | { error: string };

/** A stream's repeatable schedules (the first page of them). */
export interface SchedulesReply {
  now: number;
  total: number;
  schedules: { id: string; timing: string; nextFireAt: number | null; lastFireAt: number | null; catchUp: string | null }[];
}

export interface ScheduleRemoveReply {
  removed: boolean;
}

/** Where one entry stands in one group (ops/entry-state.ts). */
export interface EntryGroupRow {
  group: string;
  state: 'unread' | 'pending' | 'retry-waiting' | 'retry-due' | 'dead-lettered' | 'acked' | 'not-pending';
  lastDeliveredId: string;
  pending: { owner: string; idleMs: number; deliveries: number; ownerConnected: boolean | null } | null;
  retry: { dueAt: number; inMs: number } | null;
  retryUnknown?: string;
}

export interface EntryLetterRow {
  deadStream: string;
  id: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  error: string;
  stack?: string;
  deadAt: number;
  errorTruncated: boolean;
  stackTruncated: boolean;
}

export interface EntryStateReply {
  inStream: boolean;
  now: number;
  groups: EntryGroupRow[];
  letters: EntryLetterRow[];
  letterSearch: { read: number; complete: boolean } | { error: string };
}

/** One delayed entry as listed: its id (what emit gave), due time, record size and fields cut. */
export interface DelayedRow {
  id: string;
  dueAt: number;
  bytes: number;
  fields: string[] | null;
  parts: number | null;
  idempotencyKey: string | null;
}

export interface DelayedReply {
  waiting: number;
  now: number;
  entries: DelayedRow[];
  next: { id: string; dueAt: number } | null;
}

export interface DelayedEntryReply extends DelayedRow {
  stream: string;
  now: number;
}

/** A delayed entry cancelled or promoted. */
export interface DelayedChangeReply {
  found: boolean;
  moved?: boolean;
  newId?: string;
  refused?: string;
  dropped?: 'repeat' | 'no record';
}

/** A stream's rate limit for one group (/api/rate-limit): null when no worker publishes one. */
export interface RateLimitReply {
  limit: {
    /** keyPrefix + pattern: the name the limit is kept under. */
    name: string;
    state: {
      max: number;
      perMs: number;
      perKey: boolean;
      recordTtlMs: number;
      windowUsed: number;
      blockedForMs: number;
      blockedBy: string | null;
      held: { key: string; forMs: number }[];
      heldCount: number;
    };
  } | null;
}

/** Each GET of the API (`api/<call>`) and its answer. */
export interface ApiReplies {
  'rate-limit': RateLimitReply;
  'entry-state': EntryStateReply;
  delayed: DelayedReply;
  'delayed-entry': DelayedEntryReply;
  config: ConfigReply;
  consumer: ConsumerReply;
  overview: OverviewReply;
  stream: StreamRow;
  pending: PendingReply;
  entries: EntriesReply;
  entry: EntryReply;
  'dead-letters': DeadLettersReply;
  'dead-letter-streams': DeadLetterStreamsReply;
  schedules: SchedulesReply;
}

/** A pending entry's move (release, retry-now, dead-letter): its owner, and the letter's id when dead-lettered. */
export interface PendingMoveReply {
  owner: string;
  deadLetterId?: string;
}

export interface RedriveReply {
  /** Each letter's new id in its stream; null: not redriven. */
  results: { newId: string | null }[];
  /** Letters left, after a redrive of all. */
  remaining?: number;
}

export interface DeleteReply {
  deleted: string[];
}

/** An action refused (4xx) or unanswered (503): why, the reason of a pending entry's refusal, `unknown` when it may still be done. */
export interface ActionRefusal {
  error: string;
  reason?: string;
  outcome?: 'unknown';
}
