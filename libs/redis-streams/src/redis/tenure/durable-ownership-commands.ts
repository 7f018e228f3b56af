import type { ResolvedDurability } from '../../options/durability-options.js';
import type { RedisConnection } from '../connection/connect.js';
import { DurableWrites } from '../produce/durable-writes.js';
import { rawEval, type LuaScript } from '../lua/lua-script.js';
import { ownershipKeysOf, type OwnershipKeys } from '../../key-names.js';
import { CONFIRM_SETTLED, FENCED_ACK, OWNERSHIP } from './ownership-script.js';
import { parseOwnershipReply, parseStringList, type OwnershipBeat } from '../replies/replies.js';
import type { Confirmation } from '../produce/replication-wait.js';
import { shortAck, type AckDeletePolicy, type ShortAck } from '../stream-commands.js';

/**
 * An ordered partition's writes whose replication its owner waits for (durable acks): the ownership
 * beat, the fenced ack, and the check that a dead-letter move is settled, each followed by a WAIT (or
 * WAITAOF) on a connection of their own (durable-writes.ts: a wait never holds the shared command
 * connection, the writes of every partition on one master share one wait, and a write and its wait
 * reach the same master). Without a durability (carrying on degraded), the write alone.
 */
export class DurableOwnershipCommands {
  private readonly writes: DurableWrites;

  constructor(
    private readonly conn: RedisConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {
    this.writes = new DurableWrites(conn, onCluster);
  }

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

  /** The script (EVAL: see DurableWrites) and, with `durability`, the wait after it; the script's error is thrown. */
  private async run(
    s: LuaScript,
    args: readonly (string | number)[],
    durability: ResolvedDurability | undefined,
  ): Promise<{ reply: unknown; confirmed?: Confirmation }> {
    const command = rawEval(s, args);
    if (!durability) return { reply: await this.conn.call(...(command as [string, ...(string | number)[]])) };
    const { replies, confirmed } = await this.writes.write(String(args[0]), durability, [command]);
    const [err, reply] = replies[0] ?? [new Error('a script got no reply'), null];
    if (err) throw err;
    return { reply, confirmed };
  }
}
