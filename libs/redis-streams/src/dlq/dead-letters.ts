import { clusterDeadLetterStream, defaultDeadLetterStream } from '../options/server-options.js';
import type { RedisConnection } from '../redis/connect.js';
import { slotOf } from '../redis/slots.js';
import { decodeDeadLetter, type DeadLetter } from '../codec/dead-letter-codec.js';

// Re-appends one dead letter's original fields to its source stream and deletes it from the
// dead-letter stream, in one step: two operators re-driving at once cannot duplicate it.
// KEYS: dead-letter stream, source stream; ARGV: dead-letter id. Returns the new id, or false
// when the dead letter is gone (already re-driven) or belongs to another stream.
const REDRIVE_SCRIPT = `
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])[1]
if not e then return false end
local f = {}
for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
if f['stream'] ~= KEYS[2] then return false end
local fields = cjson.decode(f['fields'])
if #fields == 0 then return false end
local id = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('XDEL', KEYS[1], ARGV[1])
return id
`;

export interface RedriveResult {
  /** Id in the dead-letter stream. */
  id: string;
  /** Where it went back to, and its new id there; null when it was no longer in the dead-letter stream. */
  stream: string;
  newId: string | null;
}

/**
 * Operator's view of a dead-letter stream: list what is there, and send chosen entries back
 * to their source stream (as new entries, so their handler runs again with a fresh delivery count).
 */
export class DeadLetters {
  constructor(private readonly redis: RedisConnection) {
    redis.defineCommand('streamsRedrive', { numberOfKeys: 2, lua: REDRIVE_SCRIPT });
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

  /** Re-drives the given dead letters, or every one when `ids` is `'all'`. */
  async redrive(deadStream: string, ids: readonly string[] | 'all'): Promise<RedriveResult[]> {
    const results: RedriveResult[] = [];
    const targets = ids === 'all' ? await this.listAll(deadStream) : await this.pick(deadStream, ids);
    for (const { id, stream } of targets) {
      const newId = this.acrossSlots(deadStream, stream)
        ? await this.redriveAcrossSlots(deadStream, stream, id)
        : ((await (this.redis as RedisConnection & { streamsRedrive(...a: string[]): Promise<string | null> }).streamsRedrive(deadStream, stream, id)) ?? null);
      results.push({ id, stream, newId });
    }
    return results;
  }

  /** On a cluster, a dead-letter stream named the one-node way (`orders:dead`) is in another slot than its source. */
  private acrossSlots(deadStream: string, stream: string): boolean {
    return (this.redis as { isCluster?: boolean }).isCluster === true && slotOf(deadStream) !== slotOf(stream);
  }

  /**
   * The script's steps, one by one (one script cannot name keys of two slots): append, then
   * delete. A crash between them leaves the letter to be re-driven twice, never lost; two
   * operators re-driving the same letter at once may both append it.
   */
  private async redriveAcrossSlots(deadStream: string, stream: string, id: string): Promise<string | null> {
    const [entry] = await this.redis.xrange(deadStream, id, id);
    if (!entry) return null;
    const letter = decodeDeadLetter(id, entry[1]);
    if (letter.stream !== stream || letter.fields.length === 0) return null;
    const newId = await this.redis.xadd(stream, '*', ...letter.fields);
    await this.redis.xdel(deadStream, id);
    return newId;
  }

  private async listAll(deadStream: string): Promise<{ id: string; stream: string }[]> {
    const all: DeadLetter[] = [];
    for (let page = await this.list(deadStream, { count: 500 }); page.length > 0; page = await this.list(deadStream, { count: 500, after: page.at(-1)!.id! })) {
      all.push(...page);
    }
    return all.map((d) => ({ id: d.id!, stream: d.stream }));
  }

  private async pick(deadStream: string, ids: readonly string[]): Promise<{ id: string; stream: string }[]> {
    const found: { id: string; stream: string }[] = [];
    for (const id of ids) {
      const [entry] = await this.redis.xrange(deadStream, id, id);
      if (!entry) throw new Error(`no entry ${id} in dead-letter stream "${deadStream}"`);
      found.push({ id, stream: decodeDeadLetter(id, entry[1]).stream });
    }
    return found;
  }
}
