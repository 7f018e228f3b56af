import { fairSlotKeyOf } from '../../key-names.js';
import type { RedisConnection } from '../connection/connect.js';
import { defineLuaScripts, luaScript, type LuaScript } from '../lua/lua-script.js';
import { parseSlotsReply } from '../replies/replies.js';
import { EXCHANGE_SLOTS_SCRIPT, KEEP_SLOTS_SCRIPT } from './key-slot-scripts.js';

const KEY_SLOT_SCRIPTS: readonly LuaScript[] = [
  luaScript('streamsExchangeSlots', undefined, EXCHANGE_SLOTS_SCRIPT),
  luaScript('streamsKeepSlots', undefined, KEEP_SLOTS_SCRIPT),
];

type SlotConnection = RedisConnection & {
  streamsExchangeSlots(keys: number, ...args: (string | number)[]): Promise<unknown>;
  streamsKeepSlots(keys: number, ...args: (string | number)[]): Promise<unknown>;
};

/** One entry's slot of its key: the key (the user's, for log lines), its slots' Redis key (slotKeyOf), and the entry as a member. */
export interface KeySlot {
  key: string;
  slotKey: string;
  member: string;
}

/** Most slots one call names: the scripts' work is bounded by it (and each key's name by fairSlotKeyOf). */
export const MAX_SLOTS_PER_CALL = 500;

/**
 * A fair group's slots in Redis (key-slot-scripts.ts): each key's entries in hand, shared by every worker
 * of the group, each slot leased on Redis' clock so that a worker that dies gives its slots back by itself.
 */
export class KeySlotCommands {
  private readonly conn: SlotConnection;

  constructor(
    conn: RedisConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {
    defineLuaScripts(conn, KEY_SLOT_SCRIPTS);
    this.conn = conn as SlotConnection;
  }

  /** The Redis key of `key`'s slots in the fair pattern `name` (keyPrefix + pattern): a caller keeps it per key. */
  slotKeyOf(name: string, key: string): string {
    return fairSlotKeyOf(name, this.group, key, this.onCluster);
  }

  /**
   * `give` handed back, then a slot of each key of `take` for its entry if its key has fewer than `inHand` in hand,
   * in one round trip (more than MAX_SLOTS_PER_CALL: the rest given back first): one flag per slot taken.
   */
  async exchange(give: readonly KeySlot[], take: readonly KeySlot[], inHand: number, leaseMs: number): Promise<boolean[]> {
    let rest = give;
    while (rest.length + take.length > MAX_SLOTS_PER_CALL && rest.length > 0) {
      const chunk = rest.slice(0, MAX_SLOTS_PER_CALL);
      rest = rest.slice(chunk.length);
      await this.call(chunk, [], inHand, leaseMs);
    }
    const out: boolean[] = [];
    for (let i = 0; i < Math.max(1, take.length); i += MAX_SLOTS_PER_CALL) {
      out.push(...(await this.call(i === 0 ? rest : [], take.slice(i, i + MAX_SLOTS_PER_CALL), inHand, leaseMs)));
    }
    return out;
  }

  /** Each slot kept for another lease: one flag each (false: it had run out, and may be another entry's now). */
  async keep(slots: readonly KeySlot[], leaseMs: number): Promise<boolean[]> {
    const out: boolean[] = [];
    for (let i = 0; i < slots.length; i += MAX_SLOTS_PER_CALL) {
      const chunk = slots.slice(i, i + MAX_SLOTS_PER_CALL);
      const reply = await this.conn.streamsKeepSlots(chunk.length, ...chunk.map((s) => s.slotKey), leaseMs, ...chunk.map((s) => s.member));
      out.push(...parseSlotsReply('keep slots script', reply, chunk.length));
    }
    return out;
  }

  private async call(give: readonly KeySlot[], take: readonly KeySlot[], inHand: number, leaseMs: number): Promise<boolean[]> {
    if (give.length + take.length === 0) return [];
    const reply = await this.conn.streamsExchangeSlots(
      give.length + take.length,
      ...give.map((s) => s.slotKey),
      ...take.map((s) => s.slotKey),
      give.length,
      inHand,
      leaseMs,
      ...give.map((s) => s.member),
      ...take.map((s) => s.member),
    );
    return parseSlotsReply('exchange slots script', reply, take.length);
  }
}
