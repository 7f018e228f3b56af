import type { RedisConnection } from '../connection/connect.js';
import { isErrorReply } from '../replies/redis-errors.js';
import { MAX_SCRIPTED_VALUES, REDRIVE_SCRIPT, SKIP_REASONS } from './redrive-script.js';
import { slotOf } from '../../slots.js';
import { defineLuaScripts, luaScript } from '../lua/lua-script.js';

// No fixed key count: the target is a key of the script only when it shares the letter's slot.
const REDRIVE = luaScript('streamsRedrive', undefined, REDRIVE_SCRIPT);

/** What became of one re-driven letter: its new id in the target (null when not re-driven), and why not when it was not. */
export type RedriveOutcome = { newId: string | null; skipped?: string };

/** Tries of a wide letter's WATCH … MULTI before giving up on it (the dead-letter stream kept changing). */
const WATCH_TRIES = 5;

type Reply = (Buffer | Buffer[])[];
type Scripted = RedisConnection & { streamsRedriveBuffer(numKeys: number, ...args: string[]): Promise<Reply> };

/**
 * Every command `DeadLetters` (dlq/dead-letters.ts) sends to a dead-letter stream, and the one
 * place their replies are parsed: reads, deletes, and the re-drive of one letter (REDRIVE_SCRIPT,
 * or WATCH … MULTI for a letter too wide for it, or an append then a delete across two slots).
 */
export class DeadLetterCommands {
  private readonly redis: Scripted;

  constructor(redis: RedisConnection) {
    defineLuaScripts(redis, [REDRIVE]);
    this.redis = redis as Scripted;
  }

  /** Whether `key` exists (one EXISTS: on a cluster, keys of several slots are asked one by one). */
  async exists(key: string): Promise<boolean> {
    return Number(await this.redis.exists(key)) === 1;
  }

  /** Entries from `start` (an XRANGE start: `-`, an id, `(id`) on, oldest first, at most `count`. */
  async range(key: string, start: string, count: number): Promise<[id: string, fields: string[]][]> {
    return this.redis.xrange(key, start, '+', 'COUNT', count);
  }

  /** Whether entry `id` is in `key` (XRANGE of that id alone). */
  async has(key: string, id: string): Promise<boolean> {
    const [entry] = await this.redis.xrange(key, id, id);
    return entry !== undefined;
  }

  /** XLEN (0 when the key does not exist; WRONGTYPE when it holds no stream). */
  async length(key: string): Promise<number> {
    return this.redis.xlen(key);
  }

  /** Redis' TYPE of a key (`stream`, `hash`, … or `none`). */
  async typeOf(key: string): Promise<string> {
    return this.redis.type(key);
  }

  /** Deletes the given entries, one XDEL each; returns those that were there (the others were already gone). */
  async deleteIds(key: string, ids: readonly string[]): Promise<string[]> {
    const deleted: string[] = [];
    for (const id of ids) if (Number(await this.redis.xdel(key, id)) === 1) deleted.push(id);
    return deleted;
  }

  /** Deletes every entry (XTRIM MAXLEN 0: the key stays), those written meanwhile included; returns how many. */
  async clear(key: string): Promise<number> {
    return Number(await this.redis.xtrim(key, 'MAXLEN', 0));
  }

  /**
   * Re-drives letter `id` of `deadStream` to `target` (REDRIVE_SCRIPT). A letter Redis refuses
   * (WRONGTYPE, NOPERM …) is skipped, with Redis' reason. A letter too wide for one script is
   * re-driven under WATCH … MULTI on this connection: do not run other transactions on it meanwhile.
   */
  async redriveOne(deadStream: string, target: string, id: string): Promise<RedriveOutcome> {
    const sameSlot = !this.onCluster() || slotOf(deadStream) === slotOf(target);
    try {
      if (!sameSlot) {
        const read = outcome(await this.script(1, deadStream, id, target, '0'), deadStream, target);
        return Array.isArray(read) ? await this.appendAcrossSlots(deadStream, target, id, read) : read;
      }
      const done = outcome(await this.script(2, deadStream, target, id, target, String(MAX_SCRIPTED_VALUES)), deadStream, target);
      return Array.isArray(done) ? await this.appendWatched(deadStream, target, id) : done;
    } catch (err) {
      // Redis refused this letter (WRONGTYPE, NOPERM …): the next one may be fine.
      if (isErrorReply(err)) return { newId: null, skipped: (err as Error).message.replace(/ script: \w+, on @user_script:\d+\.?$/, '') };
      throw err;
    }
  }

  /**
   * A letter too wide for the script: read under WATCH, then append and delete in one MULTI,
   * which Redis runs only if the dead-letter stream did not change meanwhile (else: read again).
   */
  private async appendWatched(deadStream: string, target: string, id: string): Promise<RedriveOutcome> {
    for (let attempt = 0; attempt < WATCH_TRIES; attempt++) {
      await this.redis.watch(deadStream);
      let read: RedriveOutcome | Buffer[];
      try {
        read = outcome(await this.script(1, deadStream, id, target, '0'), deadStream, target);
      } catch (err) {
        await this.redis.unwatch().catch(() => undefined);
        throw err;
      }
      if (!Array.isArray(read)) {
        await this.redis.unwatch();
        return read;
      }
      // The append alone in the MULTI: an XDEL beside a refused XADD would still run (no rollback) and lose the letter.
      const done = await this.redis
        .multi()
        .xadd(target, '*', ...read)
        .exec();
      if (done === null) continue;
      const [err, newId] = done[0] ?? [new Error('XADD got no reply'), null];
      if (err) throw err;
      return this.deleteLetter(deadStream, id, String(newId));
    }
    return { newId: null, skipped: `"${deadStream}" kept changing while the letter was read; try again` };
  }

  /**
   * A letter whose stream is in another slot (`orders:dead` on a cluster): append, then delete
   * (one script cannot name keys of two slots). A crash between them leaves the letter to be
   * re-driven twice, never lost; two operators re-driving the same letter at once may both append it.
   */
  private async appendAcrossSlots(deadStream: string, target: string, id: string, fields: Buffer[]): Promise<RedriveOutcome> {
    const newId = (await this.redis.xadd(target, '*', ...fields))!;
    return this.deleteLetter(deadStream, id, newId);
  }

  /** After an append made by the client: the letter deleted, or the refusal said with the new id. */
  private async deleteLetter(deadStream: string, id: string, newId: string): Promise<RedriveOutcome> {
    try {
      await this.redis.xdel(deadStream, id);
      return { newId };
    } catch (err) {
      if (isErrorReply(err)) return notDeleted(newId, deadStream, (err as Error).message);
      throw err;
    }
  }

  private script(numKeys: 1 | 2, ...args: string[]): Promise<Reply> {
    return this.redis.streamsRedriveBuffer(numKeys, ...args);
  }

  private onCluster(): boolean {
    return (this.redis as { isCluster?: boolean }).isCluster === true;
  }
}

/** The script's reply: a result, or the fields to append (it only read them). */
function outcome(reply: Reply, deadStream: string, target: string): RedriveOutcome | Buffer[] {
  const [kind, ...rest] = reply as Buffer[];
  switch (kind?.toString()) {
    case 'ok':
      return { newId: rest[0]!.toString() };
    case 'kept':
      return notDeleted(rest[0]!.toString(), deadStream, rest[1]!.toString());
    case 'gone':
      return { newId: null, skipped: `no longer in "${deadStream}"` };
    case 'skip':
      return { newId: null, skipped: skipReason(rest, target) };
    case 'fields':
      return rest;
    default:
      throw new Error(`unexpected redrive reply ${JSON.stringify(String(kind))}`);
  }
}

/** Appended as `newId`, but the letter is still in the dead-letter stream: said, so it is not re-driven twice unseen. */
function notDeleted(newId: string, deadStream: string, error: string): RedriveOutcome {
  return {
    newId,
    skipped: `re-driven as ${newId}, but not deleted from "${deadStream}" (${error.replace(/ script: \w+, on @user_script:\d+\.?$/, '')}): delete it (XDEL) before re-driving again`,
  };
}

function skipReason([code, detail]: Buffer[], target: string): string {
  const text = code?.toString() ?? '';
  if (text === 'stream')
    return `it names stream ${JSON.stringify(detail?.toString() ?? '')}, not ${JSON.stringify(target)}: never written there`;
  return SKIP_REASONS[text] ?? text;
}
