import { createHash } from 'node:crypto';
import type { ResolvedDurability } from '../options/durability-options.js';
import type { RedisConnection } from './connect.js';
import { isNoScript } from './redis-errors.js';
import { ownershipKeysOf, type OwnershipKeys } from './ownership-commands.js';
import { CONFIRM_SETTLED_SCRIPT, FENCED_ACK_SCRIPT, OWNERSHIP_SCRIPT } from './ownership-script.js';
import { parseOwnershipReply, parseStringList, parseWaitReply, type OwnershipBeat } from './replies.js';
import { waitCommand, type Confirmation, type RawCommand } from './replication-wait.js';
import { shortAck, type AckDeletePolicy, type ShortAck } from './stream-commands.js';

interface Script {
  lua: string;
  sha: string;
  keys: number;
}

const script = (lua: string, keys: number): Script => ({ lua, keys, sha: createHash('sha1').update(lua).digest('hex') });
const OWNERSHIP = script(OWNERSHIP_SCRIPT, 4);
const FENCED_ACK = script(FENCED_ACK_SCRIPT, 2);
const CONFIRM_SETTLED = script(CONFIRM_SETTLED_SCRIPT, 2);

/**
 * An ordered partition's writes whose replication its owner waits for (durable acks): the ownership
 * beat, the fenced ack, and the check that a dead-letter move is settled, each sent with a WAIT (or
 * WAITAOF) right after it in one pipeline, on a connection of their own (a wait never holds the
 * shared command connection). The write and its wait reach the same master: one pipeline, routed by
 * the write's keys (a wait alone could reach another node on a cluster). A script goes as EVALSHA,
 * and once more as EVAL, with its own wait, where the server does not know it: an ioredis re-send
 * after NOSCRIPT would run after the wait.
 */
export class DurableOwnershipCommands {
  constructor(
    private readonly conn: RedisConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {}

  keys(stream: string): OwnershipKeys {
    return ownershipKeysOf(stream, this.group, this.onCluster);
  }

  /**
   * One ownership beat (OWNERSHIP_SCRIPT), `state` kept beside the owner key while owned; with
   * `durability`, waited for. Rejects when Redis refused or could not be reached.
   */
  async beat(
    stream: string,
    consumer: string,
    held: string,
    ttlMs: number,
    partition: number,
    token: string,
    state: string,
    durability: ResolvedDurability | undefined,
  ): Promise<{ beat: OwnershipBeat; confirmed?: Confirmation }> {
    const k = this.keys(stream);
    const args = [k.owner, k.members, k.epoch, k.durability, consumer, held, ttlMs, partition, token, state];
    const { reply, confirmed } = await this.run(OWNERSHIP, args, durability);
    return { beat: parseOwnershipReply(reply), ...(confirmed ? { confirmed } : {}) };
  }

  /** A fenced ack (FENCED_ACK_SCRIPT: FENCED once the partition is another owner's), with `durability` waited for. */
  async ackFenced(
    stream: string,
    ids: readonly string[],
    fence: string,
    deletion: AckDeletePolicy | undefined,
    durability: ResolvedDurability | undefined,
  ): Promise<{ short: ShortAck[]; confirmed?: Confirmation }> {
    const args = [this.keys(stream).owner, stream, this.group, fence, deletion ?? '', ...ids];
    const { reply, confirmed } = await this.run(FENCED_ACK, args, durability);
    const short = shortAck(stream, ids, reply, deletion);
    return { short: short ? [short] : [], ...(confirmed ? { confirmed } : {}) };
  }

  /** Which of `ids` are still pending on the master that answers (a move lost with another), the lease renewed, waited for. */
  async confirmSettled(
    stream: string,
    ids: readonly string[],
    fence: string,
    ttlMs: number,
    durability: ResolvedDurability,
  ): Promise<{ pending: string[]; confirmed: Confirmation }> {
    const args = [this.keys(stream).owner, stream, this.group, fence, ttlMs, ...ids];
    const { reply, confirmed } = await this.run(CONFIRM_SETTLED, args, durability);
    return { pending: parseStringList('settled check', reply), confirmed: confirmed! };
  }

  /** The script (EVALSHA, EVAL where unknown) and its wait, in one pipeline; the script's error is thrown. */
  private async run(
    s: Script,
    args: readonly (string | number)[],
    durability: ResolvedDurability | undefined,
  ): Promise<{ reply: unknown; confirmed?: Confirmation }> {
    const send = async (command: RawCommand) => {
      const pipeline = this.conn.pipeline();
      pipeline.call(...command);
      if (durability) pipeline.call(...waitCommand(durability));
      const results = ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
      const [err, reply] = results[0] ?? [new Error(`${s === OWNERSHIP ? 'the ownership script' : 'a script'} got no reply`), null];
      return { err, reply, wait: results[1] };
    };
    let sent = await send(['EVALSHA', s.sha, s.keys, ...args]);
    if (sent.err && isNoScript(sent.err)) sent = await send(['EVAL', s.lua, s.keys, ...args]);
    if (sent.err) throw sent.err;
    if (!durability) return { reply: sent.reply };
    const [waitErr, waitReply] = sent.wait ?? [new Error('WAIT got no reply'), null];
    let confirmed: Confirmation;
    try {
      confirmed = waitErr ? { replicas: 0, refused: waitErr.message } : parseWaitReply(waitReply, durability.fsync);
    } catch (err) {
      confirmed = { replicas: 0, refused: (err as Error).message };
    }
    return { reply: sent.reply, confirmed };
  }
}
