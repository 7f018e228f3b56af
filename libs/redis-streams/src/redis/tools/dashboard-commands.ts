import type { RedisConnection } from '../connection/connect.js';
import { connectedByGroup } from './connected-consumers.js';
import { scanStreamKeys } from '../stream-keys.js';
import { detectServerFeatures, type ServerFeatures } from '../server-features.js';
import { BROWSE_SCRIPT, DEAD_LENGTH_SCRIPT, RANGE_PREVIEW_SCRIPT, STREAM_SUMMARY_SCRIPT } from './dashboard-scripts.js';
import {
  parseBrowse,
  parseRangePreview,
  parseStreamSummary,
  type BrowsePage,
  type RangePreviewEntry,
  type StreamSummary,
} from './dashboard-replies.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';

const DASHBOARD_SCRIPTS: readonly LuaScript[] = [
  luaScript('streamsSummary', 1, STREAM_SUMMARY_SCRIPT),
  luaScript('streamsDeadLength', 1, DEAD_LENGTH_SCRIPT),
  luaScript('streamsRangePreview', 1, RANGE_PREVIEW_SCRIPT),
  luaScript('streamsBrowse', 1, BROWSE_SCRIPT),
];

type Scripted = RedisConnection & {
  streamsSummary(key: string, maxConsumers: number): Promise<unknown>;
  streamsDeadLength(key: string): Promise<number>;
  streamsRangePreview(key: string, start: string, end: string, count: number, maxBytes: number, maxParts: number): Promise<unknown>;
  streamsBrowse(...args: (string | number)[]): Promise<unknown>;
};

/** Consumers listed per group (each costs one XPENDING row); the summary gives the count of all. */
export const MAX_CONSUMERS = 100;
/** Field names and values shown per entry (a wide entry shows its first ones and the size of all). */
export const MAX_PARTS = 200;

/** What one entries page or search may read inside Redis at most (a chunk past it, sized on the entries seen). */
export const BROWSE_BYTES = 2_000_000;
export const BROWSE_PARTS = 40_000;

/** What the dashboard asks Redis, each bounded: SCAN with counts, one script per stream, ranged reads. */
export class DashboardCommands {
  private readonly redis: Scripted;

  constructor(redis: RedisConnection) {
    defineLuaScripts(redis, DASHBOARD_SCRIPTS);
    this.redis = redis as Scripted;
  }

  /** Stream keys matching `pattern` on every master, each with the master it is on (stream-keys.ts); `signal` ends the walk. */
  streamKeys(pattern: string, signal?: AbortSignal): Promise<Map<string, string>> {
    return scanStreamKeys(this.redis, pattern, signal);
  }

  /** The stream's figures (STREAM_SUMMARY_SCRIPT); null when the key is no stream (deleted since the SCAN). */
  async summary(stream: string): Promise<StreamSummary | null> {
    return parseStreamSummary(stream, await this.redis.streamsSummary(stream, MAX_CONSUMERS));
  }

  /** A dead-letter stream's length; 'wrong type' when the key holds something else, null when absent. */
  async deadLength(key: string): Promise<number | 'wrong type' | null> {
    const n = Number(await this.redis.streamsDeadLength(key));
    return n === -2 ? null : n === -1 ? 'wrong type' : n;
  }

  /** Entries from `start` to `end` (XRANGE ids), values cut to `maxBytes` inside Redis (0: ids only). */
  async rangePreview(
    key: string,
    start: string,
    end: string,
    count: number,
    maxBytes: number,
    maxParts = MAX_PARTS,
  ): Promise<RangePreviewEntry[]> {
    return parseRangePreview(await this.redis.streamsRangePreview(key, start, end, count, maxBytes, maxParts));
  }

  /**
   * Entries from `end` back to `start` (XREVRANGE ids), newest first, values cut to `maxBytes` inside
   * Redis; with `field`, only those whose field holds `value`, among at most `window` read (BROWSE_SCRIPT).
   */
  async browse(
    key: string,
    range: { end: string; start: string; count: number; maxBytes: number; window: number; field?: string; value?: string },
  ): Promise<BrowsePage> {
    const { end, start, count, maxBytes, window, field = '', value = '' } = range;
    const reply = await this.redis.streamsBrowse(
      key,
      end,
      start,
      count,
      maxBytes,
      MAX_PARTS,
      window,
      field,
      value,
      BROWSE_BYTES,
      BROWSE_PARTS,
    );
    return parseBrowse(reply);
  }

  /** The server's version and what it offers of the newer stream commands (see server-features.ts). */
  serverFeatures(): Promise<ServerFeatures> {
    return detectServerFeatures(this.redis);
  }

  /** Per group, the consumers with a connection of this library's open now (connected-consumers.ts). */
  connectedByGroup(): Promise<Map<string, Set<string>>> {
    return connectedByGroup(this.redis);
  }
}
