import type { Cluster, Redis } from 'ioredis';
import type { RedisConnection } from './connect.js';
import { parseClientNames, parseScanReply } from './replies.js';
import { consumerOfConnectionName } from './connected-consumers.js';
import { DEAD_LENGTH_SCRIPT, RANGE_PREVIEW_SCRIPT, STREAM_SUMMARY_SCRIPT } from './dashboard-scripts.js';
import { parseRangePreview, parseStreamSummary, type RangePreviewEntry, type StreamSummary } from './dashboard-replies.js';

type Scripted = RedisConnection & {
  streamsSummary(key: string, maxConsumers: number): Promise<unknown>;
  streamsDeadLength(key: string): Promise<number>;
  streamsRangePreview(key: string, start: string, end: string, count: number, maxBytes: number, maxParts: number): Promise<unknown>;
};

/** Consumers listed per group (each costs one XPENDING row); the summary gives the count of all. */
export const MAX_CONSUMERS = 100;
/** Field names and values shown per entry (a wide entry shows its first ones and the size of all). */
export const MAX_PARTS = 200;

/** What the dashboard asks Redis, each bounded: SCAN with counts, one script per stream, ranged reads. */
export class DashboardCommands {
  private readonly redis: Scripted;

  constructor(redis: RedisConnection) {
    redis.defineCommand('streamsSummary', { numberOfKeys: 1, lua: STREAM_SUMMARY_SCRIPT });
    redis.defineCommand('streamsDeadLength', { numberOfKeys: 1, lua: DEAD_LENGTH_SCRIPT });
    redis.defineCommand('streamsRangePreview', { numberOfKeys: 1, lua: RANGE_PREVIEW_SCRIPT });
    this.redis = redis as Scripted;
  }

  /** Stream keys matching `pattern` on every master (SCAN … COUNT 1000 TYPE stream), each with the master it is on (`host:port`). */
  async streamKeys(pattern: string): Promise<Map<string, string>> {
    const keys = new Map<string, string>();
    for (const node of this.masters()) {
      const at = `${node.options.host ?? '127.0.0.1'}:${node.options.port ?? 6379}`;
      let cursor = '0';
      do {
        const scanned = parseScanReply(await node.call('SCAN', cursor, 'MATCH', pattern, 'COUNT', 1000, 'TYPE', 'stream'));
        cursor = scanned.cursor;
        for (const key of scanned.keys) keys.set(key, at);
      } while (cursor !== '0');
    }
    return keys;
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

  /** Per group, the consumers with a connection of this library's open now: one CLIENT LIST per master (see connected-consumers.ts). */
  async connectedByGroup(): Promise<Map<string, Set<string>>> {
    const byGroup = new Map<string, Set<string>>();
    for (const node of this.masters()) {
      for (const name of parseClientNames(await node.call('CLIENT', 'LIST', 'TYPE', 'normal'))) {
        const owner = consumerOfConnectionName(name);
        if (!owner) continue;
        if (!byGroup.has(owner.group)) byGroup.set(owner.group, new Set());
        byGroup.get(owner.group)!.add(owner.consumer);
      }
    }
    return byGroup;
  }

  private masters(): Redis[] {
    return (this.redis as Cluster).isCluster ? (this.redis as Cluster).nodes('master') : [this.redis as Redis];
  }
}
