import { clusterDeadLetterStream, defaultDeadLetterStream } from '../options/server-options.js';
import type { RedisConnection } from '../redis/connect.js';
import { isErrorReply } from '../redis/redis-errors.js';
import { slotOf } from '../slots.js';
import { decodeDeadLetter, type DeadLetter } from '../codec/dead-letter-codec.js';
import { deadLetterSources } from './dead-letter-source.js';
import { MAX_SCRIPTED_VALUES, REDRIVE_SCRIPT, SKIP_REASONS } from '../redis/redrive-script.js';

export interface RedriveResult {
  /** Id in the dead-letter stream. */
  id: string;
  /** Where it went back to (the dead-letter stream's source), and its new id there; null when not re-driven. */
  stream: string;
  newId: string | null;
  /** Why it was not re-driven (it stays in the dead-letter stream, unless it was already gone). */
  skipped?: string;
}

export interface RedriveOptions {
  /**
   * The stream to re-drive to. Default: the one whose dead-letter stream this is under the default
   * names (`orders:dead`, `{orders}:dead` → `orders`); needed for a custom `deadLetterStream` name.
   * Letters that name another stream are skipped either way.
   */
  stream?: string;
  /**
   * Called with each letter's result as soon as it is known (a CLI prints it then: a redrive cut short
   * still says what it did). A throw from it stops the redrive there: that letter has moved, the rest stay.
   */
  onResult?: (result: RedriveResult) => void;
}

/** Tries of a wide letter's WATCH … MULTI before giving up on it (the dead-letter stream kept changing). */
const WATCH_TRIES = 5;

type Reply = (Buffer | Buffer[])[];
type Scripted = RedisConnection & { streamsRedriveBuffer(numKeys: number, ...args: string[]): Promise<Reply> };

/**
 * Operator's view of a dead-letter stream: list what is there, and send chosen entries back
 * to their source stream (as new entries, so their handler runs again with a fresh delivery count).
 */
export class DeadLetters {
  constructor(private readonly redis: RedisConnection) {
    // No fixed key count: the target is a key of the script only when it shares the letter's slot.
    redis.defineCommand('streamsRedrive', { lua: REDRIVE_SCRIPT });
  }

  /**
   * The dead-letter streams holding letters of `stream` under the default names, whichever
   * exist: `<stream>:dead` (one node, or a hash-tagged key) and `{<stream>}:dead` (a cluster).
   */
  async find(stream: string): Promise<string[]> {
    const names = [...new Set([defaultDeadLetterStream(stream), clusterDeadLetterStream(stream)])];
    const found: string[] = [];
    // One EXISTS per key: on a cluster the two names are in different slots.
    for (const name of names) if (Number(await this.redis.exists(name)) === 1) found.push(name);
    return found;
  }

  /** Oldest first, starting after `after` (exclusive), at most `count`. */
  async list(deadStream: string, { count = 100, after }: { count?: number; after?: string } = {}): Promise<DeadLetter[]> {
    const start = after ? `(${after}` : '-';
    const entries = await this.redis.xrange(deadStream, start, '+', 'COUNT', count);
    return entries.map(([id, fields]) => decodeDeadLetter(id, fields));
  }

  async count(deadStream: string): Promise<number> {
    return this.redis.xlen(deadStream);
  }

  /** Redis' TYPE of a key (`stream`, `hash`, … or `none`). */
  async typeOf(key: string): Promise<string> {
    return this.redis.type(key);
  }

  /** Deletes the given letters; returns those that were there (the others were already gone). */
  async delete(deadStream: string, ids: readonly string[]): Promise<string[]> {
    const deleted: string[] = [];
    for (const id of ids) if (Number(await this.redis.xdel(deadStream, id)) === 1) deleted.push(id);
    return deleted;
  }

  /** Deletes every letter (XTRIM MAXLEN 0: the key stays), those written meanwhile included; returns how many. */
  async purge(deadStream: string): Promise<number> {
    return Number(await this.redis.xtrim(deadStream, 'MAXLEN', 0));
  }

  /**
   * Re-drives the given dead letters, or every one when `ids` is `'all'`, to the stream whose
   * dead-letter stream this is (never to one a letter names). A letter that cannot be re-driven
   * (it names another stream, its fields are malformed, the stream refuses it) is reported as
   * skipped and left in place; the others go on. A letter too wide for one script is re-driven
   * under WATCH … MULTI on this connection: do not run other transactions on it meanwhile.
   */
  async redrive(deadStream: string, ids: readonly string[] | 'all', options: RedriveOptions = {}): Promise<RedriveResult[]> {
    const target = options.stream ?? (await this.sourceOf(deadStream));
    const chosen = ids === 'all' ? await this.allIds(deadStream) : await this.pick(deadStream, ids);
    const results: RedriveResult[] = [];
    for (const id of chosen) {
      const result = { id, stream: target, ...(await this.redriveOne(deadStream, target, id)) };
      results.push(result);
      options.onResult?.(result);
    }
    return results;
  }

  /** The source of a dead-letter stream under the default names; when two names fit, the one that exists. */
  private async sourceOf(deadStream: string): Promise<string> {
    const candidates = deadLetterSources(deadStream);
    if (candidates.length === 1) return candidates[0]!;
    const existing: string[] = [];
    for (const key of candidates) if (Number(await this.redis.exists(key)) === 1) existing.push(key);
    if (existing.length === 1) return existing[0]!;
    const which =
      candidates.length === 0
        ? 'no default name gives it'
        : `it may be the one of ${candidates.map((c) => JSON.stringify(c)).join(' or ')}`;
    throw new Error(
      `cannot tell which stream ${JSON.stringify(deadStream)} holds the dead letters of (${which}): name it (API: { stream }, CLI: --to <stream>)`,
    );
  }

  private async redriveOne(deadStream: string, target: string, id: string): Promise<Outcome> {
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
  private async appendWatched(deadStream: string, target: string, id: string): Promise<Outcome> {
    for (let attempt = 0; attempt < WATCH_TRIES; attempt++) {
      await this.redis.watch(deadStream);
      let read: Outcome | Buffer[];
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
  private async appendAcrossSlots(deadStream: string, target: string, id: string, fields: Buffer[]): Promise<Outcome> {
    const newId = (await this.redis.xadd(target, '*', ...fields))!;
    return this.deleteLetter(deadStream, id, newId);
  }

  /** After an append made by the client: the letter deleted, or the refusal said with the new id. */
  private async deleteLetter(deadStream: string, id: string, newId: string): Promise<Outcome> {
    try {
      await this.redis.xdel(deadStream, id);
      return { newId };
    } catch (err) {
      if (isErrorReply(err)) return notDeleted(newId, deadStream, (err as Error).message);
      throw err;
    }
  }

  private script(numKeys: 1 | 2, ...args: string[]): Promise<Reply> {
    return (this.redis as Scripted).streamsRedriveBuffer(numKeys, ...args);
  }

  private onCluster(): boolean {
    return (this.redis as { isCluster?: boolean }).isCluster === true;
  }

  private async allIds(deadStream: string): Promise<string[]> {
    const ids: string[] = [];
    for (
      let page = await this.list(deadStream, { count: 500 });
      page.length > 0;
      page = await this.list(deadStream, { count: 500, after: page.at(-1)!.id! })
    ) {
      for (const d of page) ids.push(d.id!);
    }
    return ids;
  }

  private async pick(deadStream: string, ids: readonly string[]): Promise<string[]> {
    for (const id of ids) {
      const [entry] = await this.redis.xrange(deadStream, id, id);
      if (!entry) throw new Error(`no entry ${id} in dead-letter stream "${deadStream}"`);
    }
    return [...ids];
  }
}

type Outcome = { newId: string | null; skipped?: string };

/** The script's reply: a result, or the fields to append (it only read them). */
function outcome(reply: Reply, deadStream: string, target: string): Outcome | Buffer[] {
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
function notDeleted(newId: string, deadStream: string, error: string): Outcome {
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
