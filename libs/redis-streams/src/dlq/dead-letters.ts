import { deadLetterNamesOf, deadLetterSourcesOf } from '../key-names.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { DeadLetterCommands } from '../redis/tools/dead-letter-commands.js';
import { decodeDeadLetter, type DeadLetter } from '../codec/dead-letter-codec.js';

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

/**
 * Operator's view of a dead-letter stream: list what is there, and send chosen entries back
 * to their source stream (as new entries, so their handler runs again with a fresh delivery count).
 */
export class DeadLetters {
  private readonly commands: DeadLetterCommands;

  constructor(redis: RedisConnection) {
    this.commands = new DeadLetterCommands(redis);
  }

  /**
   * The dead-letter streams holding letters of `stream` under the default names, whichever
   * exist: `<stream>:dead` (one node, or a hash-tagged key) and `{<stream>}:dead` (a cluster).
   */
  async find(stream: string): Promise<string[]> {
    const names = deadLetterNamesOf(stream);
    const found: string[] = [];
    // One EXISTS per key: on a cluster the two names are in different slots.
    for (const name of names) if (await this.commands.exists(name)) found.push(name);
    return found;
  }

  /** Oldest first, starting after `after` (exclusive), at most `count`. */
  async list(deadStream: string, { count = 100, after }: { count?: number; after?: string } = {}): Promise<DeadLetter[]> {
    const start = after ? `(${after}` : '-';
    const entries = await this.commands.range(deadStream, start, count);
    return entries.map(([id, fields]) => decodeDeadLetter(id, fields));
  }

  async count(deadStream: string): Promise<number> {
    return this.commands.length(deadStream);
  }

  /** Redis' TYPE of a key (`stream`, `hash`, … or `none`). */
  async typeOf(key: string): Promise<string> {
    return this.commands.typeOf(key);
  }

  /** Deletes the given letters; returns those that were there (the others were already gone). */
  async delete(deadStream: string, ids: readonly string[]): Promise<string[]> {
    return this.commands.deleteIds(deadStream, ids);
  }

  /** Deletes every letter (XTRIM MAXLEN 0: the key stays), those written meanwhile included; returns how many. */
  async purge(deadStream: string): Promise<number> {
    return this.commands.clear(deadStream);
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
      const result = { id, stream: target, ...(await this.commands.redriveOne(deadStream, target, id)) };
      results.push(result);
      options.onResult?.(result);
    }
    return results;
  }

  /** The source of a dead-letter stream under the default names; when two names fit, the one that exists. */
  private async sourceOf(deadStream: string): Promise<string> {
    const candidates = deadLetterSourcesOf(deadStream);
    if (candidates.length === 1) return candidates[0]!;
    const existing: string[] = [];
    for (const key of candidates) if (await this.commands.exists(key)) existing.push(key);
    if (existing.length === 1) return existing[0]!;
    const which =
      candidates.length === 0
        ? 'no default name gives it'
        : `it may be the one of ${candidates.map((c) => JSON.stringify(c)).join(' or ')}`;
    throw new Error(
      `cannot tell which stream ${JSON.stringify(deadStream)} holds the dead letters of (${which}): name it (API: { stream }, CLI: --to <stream>)`,
    );
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
      if (!(await this.commands.has(deadStream, id))) throw new Error(`no entry ${id} in dead-letter stream "${deadStream}"`);
    }
    return [...ids];
  }
}
