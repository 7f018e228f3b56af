import { ownershipKeysOf, type OwnershipKeys } from '../../key-names.js';
import { parseAutoClaimIds, parseOwnershipReply, type OwnershipBeat } from '../replies/replies.js';
import type { ScriptedConnection } from '../connection/scripted-connection.js';

/** The commands of ordered partitions' ownership (OWNERSHIP_SCRIPT and its kin); replies parsed in replies.ts. */
export class OwnershipCommands {
  constructor(
    private readonly conn: ScriptedConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {}

  keys(stream: string): OwnershipKeys {
    return ownershipKeysOf(stream, this.group, this.onCluster);
  }

  /** One beat: membership renewed, the partition taken, kept or given up as the share-out says (see OWNERSHIP_SCRIPT). `held`: the owner value this process holds, '' for none. */
  async beat(stream: string, consumer: string, held: string, ttlMs: number, partition: number, token: string): Promise<OwnershipBeat> {
    const k = this.keys(stream);
    return parseOwnershipReply(
      await this.conn.streamsOwnership(k.owner, k.members, k.epoch, k.durability, consumer, held, ttlMs, partition, token, ''),
    );
  }

  /** Gives the partition up (if still held with the owner value `held`; '' for none); `leaving`: the membership ends too. */
  async release(stream: string, consumer: string, held: string, leaving: boolean): Promise<void> {
    const k = this.keys(stream);
    await this.conn.streamsReleaseOwnership(k.owner, k.members, consumer, held, leaving ? '1' : '0');
  }

  /**
   * A new owner takes every entry pending in the group on `stream` (XAUTOCLAIM … 0 … JUSTID to the
   * end: the previous owner's, whatever their idle time; no delivery counted), so that its
   * self-drain settles them in id order before it reads anything new. How many it took.
   */
  async takeOver(stream: string, consumer: string, count = 1000): Promise<number> {
    let cursor = '0-0';
    let taken = 0;
    do {
      const page = parseAutoClaimIds(await this.conn.xautoclaim(stream, this.group, consumer, 0, cursor, 'COUNT', count, 'JUSTID'));
      cursor = page.cursor;
      taken += page.taken;
    } while (cursor !== '0-0');
    return taken;
  }

  /**
   * Entries this owner read and never started, given back before it releases the partition: their
   * delivery counts put back to what they were before its read (XCLAIM … RETRYCOUNT … JUSTID, one per
   * count), so that the next owner's self-drain, which counts a delivery, does not count two.
   */
  async giveBack(stream: string, consumer: string, entries: readonly { id: string; deliveryCount: number }[]): Promise<void> {
    const byCount = new Map<number, string[]>();
    for (const e of entries) {
      const before = Math.max(0, e.deliveryCount - 1);
      (byCount.get(before) ?? byCount.set(before, []).get(before)!).push(e.id);
    }
    if (byCount.size === 0) return;
    const pipeline = this.conn.pipeline();
    for (const [count, ids] of byCount) pipeline.xclaim(stream, this.group, consumer, 0, ...ids, 'RETRYCOUNT', count, 'JUSTID');
    for (const [err] of (await pipeline.exec()) ?? []) if (err) throw err;
  }
}
