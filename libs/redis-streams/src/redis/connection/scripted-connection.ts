import type { RedisConnection } from './connect.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';
import { AUDIT_SCRIPT } from '../custody/audit-script.js';
import { CONSUMER_CLEANUP_SCRIPT } from '../upkeep/consumer-cleanup-script.js';
import { DEAD_LETTER_SCRIPT } from '../settle/dead-letter-script.js';
import { ENTRY_BYTES_SCRIPT } from '../settle/entry-bytes-script.js';
import { LEASE_SCRIPT, PUT_BACK_SCRIPT } from '../custody/lease-script.js';
import { OWN_PENDING_SCRIPT } from '../custody/own-pending-script.js';
import { RECLAIM_ROUND_SCRIPT } from '../read/reclaim-round-script.js';
import { RECOVER_SCRIPT } from '../read/recover-script.js';
import { FENCED_ACK, OWNERSHIP, RELEASE_OWNERSHIP } from '../tenure/ownership-script.js';
import { ADOPT_RETRY_SCRIPT, RETAKE_ORPHANS_SCRIPT, SCHEDULE_RETRY_SCRIPT } from '../custody/retry-scripts.js';

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

/** The loop's scripts (a tool's and a feature's own are beside their commands, registered the same way). */
const LOOP_SCRIPTS: readonly LuaScript[] = [
  luaScript('streamsLease', 1, LEASE_SCRIPT),
  luaScript('streamsPutBack', 1, PUT_BACK_SCRIPT),
  luaScript('streamsDeadLetter', 3, DEAD_LETTER_SCRIPT),
  luaScript('streamsEntryBytes', 1, ENTRY_BYTES_SCRIPT),
  luaScript('streamsRecover', 1, RECOVER_SCRIPT),
  luaScript('streamsReclaimRound', undefined, RECLAIM_ROUND_SCRIPT),
  luaScript('streamsAudit', 2, AUDIT_SCRIPT),
  luaScript('streamsScheduleRetry', 2, SCHEDULE_RETRY_SCRIPT),
  luaScript('streamsAdoptRetry', 2, ADOPT_RETRY_SCRIPT),
  luaScript('streamsRetakeOrphans', 2, RETAKE_ORPHANS_SCRIPT),
  luaScript('streamsOwnPending', 2, OWN_PENDING_SCRIPT),
  luaScript('streamsCleanConsumers', 2, CONSUMER_CLEANUP_SCRIPT),
  OWNERSHIP,
  RELEASE_OWNERSHIP,
  FENCED_ACK,
];

/** Defines every script of the loop on `conn` (ioredis keeps one definition per name). */
export function defineScripts(conn: RedisConnection): ScriptedConnection {
  defineLuaScripts(conn, LOOP_SCRIPTS);
  return conn as ScriptedConnection;
}
