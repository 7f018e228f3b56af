import type { RedisConnection } from '../connection/connect.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';
import { DelayedCommands, PROMOTE_BUDGET } from '../upkeep/delayed-commands.js';
import { idempotencyKeyPrefixOf } from '../../key-names.js';
import { DELAYED_PAGE_SCRIPT, LETTERS_OF_SCRIPT, PROMOTE_ONE_SCRIPT } from './entry-scripts.js';
import {
  parseDelayedPage,
  parseDelayedPromotion,
  parseLettersOf,
  type DelayedPage,
  type DelayedPromotion,
  type LettersOf,
} from './entry-replies.js';

const ENTRY_SCRIPTS: readonly LuaScript[] = [
  luaScript('streamsLettersOf', 1, LETTERS_OF_SCRIPT),
  luaScript('streamsDelayedPage', 2, DELAYED_PAGE_SCRIPT),
  luaScript('streamsPromoteOne', 3, PROMOTE_ONE_SCRIPT),
];

type Scripted = RedisConnection & {
  streamsLettersOf(dead: string, start: string, stream: string, id: string, most: number, bytes: number, keep: number): Promise<unknown>;
  streamsDelayedPage(...args: (string | number)[]): Promise<unknown>;
  streamsPromoteOne(schedule: string, entries: string, stream: string, id: string, prefix: string, budget: number): Promise<unknown>;
};

/** What one search of a dead-letter stream for an entry's letters reads at most: letters, and bytes of them. */
export const LETTERS_SEARCHED = 1_000;
export const LETTERS_SEARCH_BYTES = 1_000_000;
/** Letters of one entry kept (a redriven entry dead-lettered again has several). */
export const LETTERS_KEPT = 10;
/** What one page of delayed entries, or one delayed entry, reads at most of their records (each shown cut; past it, sizes only). */
export const DELAYED_PAGE_BYTES = 1_000_000;

/** What the entry page and the stream page's delayed list ask Redis, each bounded by count and bytes (entry-scripts.ts). */
export class EntryCommands {
  private readonly redis: Scripted;
  private readonly delayed: DelayedCommands;
  private readonly onCluster: boolean;

  constructor(redis: RedisConnection) {
    defineLuaScripts(redis, ENTRY_SCRIPTS);
    this.redis = redis as Scripted;
    this.onCluster = (redis as { isCluster?: boolean }).isCluster === true;
    this.delayed = new DelayedCommands(redis, this.onCluster);
  }

  /** The letters in `dead` of entry `id` of `stream`, searched from `id`'s time on (LETTERS_OF_SCRIPT). */
  async lettersOf(dead: string, stream: string, id: string): Promise<LettersOf> {
    const start = `${id.split('-')[0]}-0`;
    return parseLettersOf(await this.redis.streamsLettersOf(dead, start, stream, id, LETTERS_SEARCHED, LETTERS_SEARCH_BYTES, LETTERS_KEPT));
  }

  /** A page of `stream`'s delayed entries, earliest due first, after `after` (DELAYED_PAGE_SCRIPT). */
  async delayedPage(
    stream: string,
    after: { id: string; dueAt: number } | undefined,
    count: number,
    maxBytes: number,
    maxParts: number,
  ): Promise<DelayedPage> {
    const k = this.delayed.keys(stream);
    const reply = await this.redis.streamsDelayedPage(
      k.schedule,
      k.entries,
      'page',
      after?.id ?? '',
      after?.dueAt ?? 0,
      count,
      maxBytes,
      DELAYED_PAGE_BYTES,
      maxParts,
    );
    return parseDelayedPage(reply);
  }

  /** One delayed entry of `stream`; its row is absent when it no longer waits. */
  async delayedEntry(stream: string, id: string, maxBytes: number, maxParts: number): Promise<DelayedPage> {
    const k = this.delayed.keys(stream);
    return parseDelayedPage(
      await this.redis.streamsDelayedPage(k.schedule, k.entries, 'one', id, 0, 1, maxBytes, DELAYED_PAGE_BYTES, maxParts),
    );
  }

  /** Cancels delayed entry `id` of `stream` (delayed-commands.ts): true if it was waiting. */
  cancelDelayed(stream: string, id: string): Promise<boolean> {
    return this.delayed.cancel(stream, id);
  }

  /**
   * Moves delayed entry `id` of `stream` in now, if it still waits, as a worker would (PROMOTE_ONE_SCRIPT):
   * `moved` only when this call moved it, with its stream id; 'gone' when it no longer waited.
   */
  async promoteDelayed(stream: string, id: string): Promise<DelayedPromotion> {
    const k = this.delayed.keys(stream);
    const prefix = idempotencyKeyPrefixOf(stream, this.onCluster);
    return parseDelayedPromotion(await this.redis.streamsPromoteOne(k.schedule, k.entries, stream, id, prefix, PROMOTE_BUDGET.bytes));
  }
}
