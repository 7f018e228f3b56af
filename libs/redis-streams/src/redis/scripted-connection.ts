import type { RedisConnection } from './connect.js';
import { AUDIT_SCRIPT } from './audit-script.js';
import { CONSUMER_CLEANUP_SCRIPT } from './consumer-cleanup-script.js';
import { DEAD_LETTER_SCRIPT } from './dead-letter-script.js';
import { ENTRY_BYTES_SCRIPT } from './entry-bytes-script.js';
import { LEASE_SCRIPT, PUT_BACK_SCRIPT } from './lease-script.js';
import { OWN_PENDING_SCRIPT } from './own-pending-script.js';
import { RECLAIM_ROUND_SCRIPT } from './reclaim-round-script.js';
import { RECOVER_SCRIPT } from './recover-script.js';
import { FENCED_ACK_SCRIPT, OWNERSHIP_SCRIPT, RELEASE_OWNERSHIP_SCRIPT } from './ownership-script.js';
import { ADOPT_RETRY_SCRIPT, RETAKE_ORPHANS_SCRIPT, SCHEDULE_RETRY_SCRIPT } from './retry-scripts.js';

/** A connection with the transport's Lua scripts defined on it (ioredis sends EVALSHA, EVAL once when unknown). */
export type ScriptedConnection = RedisConnection & {
  streamsRecover(
    key: string,
    group: string,
    consumer: string,
    highest: string,
    force: string,
    ...owed: string[]
  ): Promise<[number, string[]] | number>;
  streamsLease(key: string, group: string, consumer: string, idleMs: number, ...ids: string[]): Promise<string[]>;
  /** `idsAndCounts`: id, delivery count to put back, … */
  streamsPutBack(key: string, group: string, consumer: string, idleMs: number, ...idsAndCounts: (string | number)[]): Promise<string[]>;
  streamsDeadLetter(
    source: string,
    dead: string,
    retryKey: string,
    group: string,
    consumer: string,
    id: string,
    copy: '1' | '0',
    trim: string,
    trimValue: string,
    /** '' (XACK), or XACKDEL's KEEPREF / ACKED. */
    deletion: string,
    ...fields: string[]
  ): Promise<string | null>;
  streamsEntryBytes(key: string, id: string): Promise<number>;
  /** Variadic keys: the stream count first, then the streams, then the arguments. */
  streamsReclaimRound(keyCount: number, ...keysThenArgs: (string | number)[]): Promise<unknown>;
  streamsAudit(key: string, retryKey: string, group: string, consumer: string, claimIdle: string, ...items: string[]): Promise<unknown>;
  streamsScheduleRetry(
    retryKey: string,
    key: string,
    delayMs: number,
    id: string,
    group: string,
    consumer: string,
    uncounted: '1' | '0',
    /** The failed delivery's count: recorded also while another consumer holds it with that count; '' not. */
    deliveryCount: string,
    /** '1': taken back when it is in nobody's pending list. */
    reown: '1' | '0',
  ): Promise<number>;
  streamsOwnPending(key: string, retryKey: string, group: string, consumer: string, start: string, count: number): Promise<unknown>;
  streamsRetakeOrphans(
    key: string,
    retryKey: string,
    group: string,
    consumer: string,
    cursor: number,
    graceMs: number,
    count: number,
    budgetBytes: number,
  ): Promise<unknown>;
  streamsAdoptRetry(
    key: string,
    retryKey: string,
    group: string,
    consumer: string,
    room: number,
    minIdleMs: number,
    ...entries: string[]
  ): Promise<unknown>;
  streamsCleanConsumers(
    key: string,
    lock: string,
    group: string,
    idleMs: number,
    intervalMs: number,
    self: string,
    ...connected: string[]
  ): Promise<string[] | number | null>;
  streamsOwnership(
    owner: string,
    members: string,
    epochKey: string,
    durabilityKey: string,
    consumer: string,
    held: string,
    ttlMs: number,
    partition: number,
    token: string,
    durability: string,
  ): Promise<unknown>;
  streamsReleaseOwnership(owner: string, members: string, consumer: string, held: string, leaving: '1' | '0'): Promise<unknown>;
  /** '' policy: XACK; else XACKDEL with it. */
  streamsFencedAck(owner: string, key: string, group: string, fence: string, policy: string, ...ids: string[]): Promise<unknown>;
};

/** Defines every script of the transport on `conn` (ioredis keeps one definition per name). */
export function defineScripts(conn: RedisConnection): ScriptedConnection {
  conn.defineCommand('streamsLease', { numberOfKeys: 1, lua: LEASE_SCRIPT });
  conn.defineCommand('streamsPutBack', { numberOfKeys: 1, lua: PUT_BACK_SCRIPT });
  conn.defineCommand('streamsDeadLetter', { numberOfKeys: 3, lua: DEAD_LETTER_SCRIPT });
  conn.defineCommand('streamsEntryBytes', { numberOfKeys: 1, lua: ENTRY_BYTES_SCRIPT });
  conn.defineCommand('streamsRecover', { numberOfKeys: 1, lua: RECOVER_SCRIPT });
  conn.defineCommand('streamsReclaimRound', { lua: RECLAIM_ROUND_SCRIPT });
  conn.defineCommand('streamsAudit', { numberOfKeys: 2, lua: AUDIT_SCRIPT });
  conn.defineCommand('streamsScheduleRetry', { numberOfKeys: 2, lua: SCHEDULE_RETRY_SCRIPT });
  conn.defineCommand('streamsAdoptRetry', { numberOfKeys: 2, lua: ADOPT_RETRY_SCRIPT });
  conn.defineCommand('streamsRetakeOrphans', { numberOfKeys: 2, lua: RETAKE_ORPHANS_SCRIPT });
  conn.defineCommand('streamsOwnPending', { numberOfKeys: 2, lua: OWN_PENDING_SCRIPT });
  conn.defineCommand('streamsCleanConsumers', { numberOfKeys: 2, lua: CONSUMER_CLEANUP_SCRIPT });
  conn.defineCommand('streamsOwnership', { numberOfKeys: 4, lua: OWNERSHIP_SCRIPT });
  conn.defineCommand('streamsReleaseOwnership', { numberOfKeys: 2, lua: RELEASE_OWNERSHIP_SCRIPT });
  conn.defineCommand('streamsFencedAck', { numberOfKeys: 2, lua: FENCED_ACK_SCRIPT });
  return conn as ScriptedConnection;
}
