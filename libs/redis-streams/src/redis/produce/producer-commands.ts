import type { Redis } from 'ioredis';
import type { RedisConnection } from '../connection/connect.js';
import { parseReadReply } from '../replies/replies.js';
import type { RetentionPolicy } from '../../options/retention-options.js';
import { ageBoundId, xaddTrimArgs } from './retention.js';
import { TRIM_SCAN_LIMIT, TRIM_SCRIPT } from './trim-script.js';
import type { StreamEntry } from '../../stream-entry.js';
import {
  appendCommand,
  APPEND_SCRIPTS,
  parseAppended,
  rawAppend,
  sendAppend,
  type OnceAppended,
  type OnceWrite,
} from './idempotent-add.js';
import type { RawCommand } from './replication-wait.js';
import { detectServerFeatures, type ServerFeatures } from '../server-features.js';
import { defineLuaScripts, luaScript, rawEval } from '../lua/lua-script.js';

const TRIM = luaScript('streamsTrim', 1, TRIM_SCRIPT);

/**
 * The trim script runs on the first write of a stream and then on every TRIM_EVERY-th: it costs
 * Redis 10–40 µs (a Lua call reading every group's state) against ~3 µs for the XADD, and
 * trimming is approximate anyway (`XTRIM … ~` removes whole nodes of ~100 entries), so the
 * stream's size moves by less than a node between two trims.
 */
export const TRIM_EVERY = 20;

/** The producer side's stream commands: appends with retention, and the reply stream of `send`. */
export class ProducerCommands {
  private readonly writesSinceTrim = new Map<string, number>();

  constructor(private readonly conn: RedisConnection) {
    defineLuaScripts(conn, [TRIM, ...APPEND_SCRIPTS]);
  }

  /** The server's version and what it offers of the newer stream commands (see server-features.ts). */
  serverFeatures(): Promise<ServerFeatures> {
    return detectServerFeatures(this.conn);
  }

  /**
   * XADD, trimmed per `policy`: inline `MAXLEN ~`/`MINID ~` when plain, else the trim script in
   * the same round trip (every TRIM_EVERY-th write of the stream; a safe one with ACKED where
   * `features` has it). A failed trim does not fail the write (the entry is in; a later write trims
   * again): it comes back as `trimError`. `once`: at most one entry per key in the stream's window (idempotent-add.ts).
   */
  async add(
    stream: string,
    fields: readonly string[],
    policy: RetentionPolicy | undefined,
    once?: OnceWrite,
    features?: Pick<ServerFeatures, 'ackDelete'>,
  ): Promise<OnceAppended & { trimError?: Error }> {
    const now = Date.now();
    const inline = xaddTrimArgs(policy, now);
    const writes = this.writesSinceTrim.get(stream) ?? 0;
    this.writesSinceTrim.set(stream, (writes + 1) % TRIM_EVERY);
    if (!policy || inline.length > 0 || writes !== 0 || (!policy.safe && policy.maxLen === undefined)) {
      return parseAppended(await sendAppend(this.conn, appendCommand(stream, [...inline, '*', ...fields], once)), once);
    }
    const ageBound = ageBoundId(policy.maxAgeMs, now) ?? '';
    const pipeline = this.conn.pipeline() as ReturnType<Redis['pipeline']> & { streamsTrim(...args: unknown[]): unknown };
    sendAppend(pipeline, appendCommand(stream, ['*', ...fields], once));
    const acked = policy.safe && features?.ackDelete === true;
    pipeline.streamsTrim(stream, policy.maxLen ?? 0, ageBound, policy.safe ? '1' : '0', TRIM_SCAN_LIMIT, acked ? '1' : '0');
    const [added, trimmed] = (await pipeline.exec()) ?? [];
    if (!added) throw new Error('XADD got no reply');
    if (added[0]) throw added[0];
    return { ...parseAppended(added[1], once), ...(trimmed?.[0] ? { trimError: trimmed[0] } : {}) };
  }

  /**
   * The same append as `add`, as raw commands for a durable write's pipeline (durable-writes.ts):
   * the XADD (or its script), and the trim script when this write is the stream's turn to trim.
   * `parse` reads their replies as `add` answers.
   */
  addCommands(
    stream: string,
    fields: readonly string[],
    policy: RetentionPolicy | undefined,
    once?: OnceWrite,
    features?: Pick<ServerFeatures, 'ackDelete'>,
  ): { commands: RawCommand[]; parse: (replies: readonly [Error | null, unknown][]) => OnceAppended & { trimError?: Error } } {
    const now = Date.now();
    const inline = xaddTrimArgs(policy, now);
    const writes = this.writesSinceTrim.get(stream) ?? 0;
    this.writesSinceTrim.set(stream, (writes + 1) % TRIM_EVERY);
    const trims = !(!policy || inline.length > 0 || writes !== 0 || (!policy.safe && policy.maxLen === undefined));
    const commands: RawCommand[] = [rawAppend(appendCommand(stream, [...(trims ? [] : inline), '*', ...fields], once))];
    if (trims) {
      const acked = policy.safe && features?.ackDelete === true;
      const ageBound = ageBoundId(policy.maxAgeMs, now) ?? '';
      commands.push(rawEval(TRIM, [stream, policy.maxLen ?? 0, ageBound, policy.safe ? '1' : '0', TRIM_SCAN_LIMIT, acked ? '1' : '0']));
    }
    return {
      commands,
      parse: ([added, trimmed]) => {
        if (!added) throw new Error('XADD got no reply');
        if (added[0]) throw added[0];
        return { ...parseAppended(added[1], once), ...(trimmed?.[0] ? { trimError: trimmed[0] } : {}) };
      },
    };
  }

  /** XREAD of a reply stream (one reader, so no group): entries after `afterId`. */
  async readReplies(conn: Redis, key: string, afterId: string, count: number, blockMs: number): Promise<StreamEntry[]> {
    return parseReadReply(await conn.call('XREAD', 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, afterId), 1);
  }

  /** Forgets replies that were read, and keeps the stream alive for `ttlMs` more. */
  async consumed(key: string, ids: readonly string[], ttlMs: number): Promise<void> {
    const tx = this.conn.multi();
    if (ids.length > 0) tx.xdel(key, ...ids);
    await tx.pexpire(key, ttlMs).exec();
  }

  async drop(key: string): Promise<void> {
    await this.conn.del(key);
  }
}
