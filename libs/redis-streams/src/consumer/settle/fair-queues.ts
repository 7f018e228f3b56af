import { performance } from 'node:perf_hooks';
import { describeError } from '../../describe-error.js';
import { quotedPreview as preview } from '../../escape-control.js';
import type { Logger } from '../../ports.js';
import { isRefusal } from '../../redis/replies/redis-errors.js';
import type { KeySlot } from '../../redis/settle/key-slot-commands.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { Custody } from '../custody/custody.js';
import type { StopSignal } from '../stop-signal.js';
import type { AckPipeline } from './ack-pipeline.js';
import type { BatchProgress } from './batch-progress.js';
import { idList } from './batch-settler.js';
import { RecountBatch } from './recount-batch.js';
import type { DeliverySource, SettledEvent } from './settled-event.js';

/** Entries a reader's fair queues hold read and not started before the fetch waits: memory stays bounded whatever one key's backlog. */
export const MAX_FAIR_HELD = 10_000;
/** And their bytes (fields and values, as read): entries of 1 MB stop the reads at 64, not 10,000. */
export const MAX_FAIR_HELD_BYTES = 64 * 1024 * 1024;

/** Entries a fair pattern's park asks for at most (its `batchSize` if more): reading past a backlog of 10,000 takes 50 reads, not 1,000. */
export const FAIR_READ_COUNT = 200;
/** ...and as many as fit these bytes, by the entries read so far: a read of large entries asks for fewer. */
const FAIR_READ_BYTES = 8 * 1024 * 1024;

/**
 * The reads go on while fewer keys than this (or two rounds of `concurrency`, if more) have an entry that may start:
 * enough keys to take turns that a key read later waits at most that many turns; a key's backlog alone never stops them.
 */
const READY_KEYS = 16;

/** A key whose entry waits for the lease's next answer (it was not confirmed ours for too long) is looked at again after this. */
const STALE_RETRY_MS = 50;

/** A key whose slot Redis refused (its `inHand` taken by other workers) is asked again after this, doubling up to the most. */
const SLOT_RETRY_MIN_MS = 25;
const SLOT_RETRY_MAX_MS = 500;

/** The group's slots of each key in hand, in Redis (KeySlotCommands with the pattern's name bound). */
export interface FairSlots {
  /** The Redis key of a key's slots (kept per key here: it is escaped, or hashed, once). */
  slotKeyOf(key: string): string;
  /** `give` handed back, then a slot taken for each of `take` (one round trip): one flag per slot taken. */
  exchange(give: readonly KeySlot[], take: readonly KeySlot[]): Promise<boolean[]>;
  keep(slots: readonly KeySlot[]): Promise<boolean[]>;
}

export interface FairQueuesDeps {
  /** The pattern, as log lines name it. */
  pattern: string;
  /** Its slots' keys as an ACL key pattern (`app:jobs:inhand:<group>:*`), for the refusal's line. */
  slotKeys: string;
  /** Decides one entry (checks, admission, handler, outcome); rejects only when Redis failed (the entry is then still pending). */
  decide: (entry: StreamEntry, source: DeliverySource) => Promise<SettledEvent>;
  custody: Pick<Custody, 'confirmedAt' | 'release' | 'settledUnacked'>;
  acks: Pick<AckPipeline, 'send' | 'flush'>;
  /** Handlers running at once, every key together. */
  concurrency: number;
  /** Most entries of one key in hand at once, by the whole group. */
  inHand: number;
  /** The keys of fetched entries (undefined: keyless), in their order; may read their payload. */
  keysOf: (entries: readonly StreamEntry[]) => Promise<(string | undefined)[]> | (string | undefined)[];
  slots: FairSlots;
  stop: StopSignal;
  /** Handlers running, for the stuck watch and an abandon (see BatchProgress). */
  inProgress: Set<BatchProgress>;
  /** Whether the stream is paused for the group now: nothing of it starts, and what waits goes back. */
  barred: () => boolean;
  /** Hands back entries read and not started, with the delivery counts they had before the read (idle `handBackIdleMs`). */
  putBack: (entries: readonly StreamEntry[], idleMs: number) => Promise<void>;
  handBackIdleMs: number;
  /**
   * An entry not confirmed ours by the lease for this long (a worker frozen, cut off) waits for the lease's next answer
   * before it starts: a peer may have taken it over meanwhile, and settled it.
   */
  staleAfterMs: number;
  /** Gives entries put back while they waited (see uncountWaiting) the count they were read with, as they start: the ids it did. */
  recount: (entries: readonly StreamEntry[]) => Promise<string[]>;
  /** Most bytes of entries held waiting (MAX_FAIR_HELD_BYTES; a test's smaller). */
  maxHeldBytes?: number;
  logger: Logger;
}

interface Queued {
  entry: StreamEntry;
  source: DeliverySource;
  /** performance.now() when it was read. */
  readAt: number;
  /** Its fields' and values' length, as read. */
  bytes: number;
}

/** An entry's fields and values, in UTF-16 units (about its bytes). */
function entryBytes(entry: StreamEntry): number {
  let n = 0;
  for (const f of entry.fields ?? []) n += f.length;
  return n;
}

/** One key's queue: its entries waiting (read, not started), and how many of it run here. */
interface FairKey {
  /** The user's key; undefined for the keyless group (entries without a key: no slot, never more than `concurrency`). */
  readonly key: string | undefined;
  /** Its slots' Redis key; undefined for the keyless group. */
  readonly slotKey: string | undefined;
  entries: Queued[];
  /** Index of the first waiting entry in `entries` (a deque without shifting a long backlog). */
  head: number;
  /** Its entries running here (slot taken, or taking one). */
  running: number;
  /** In the ring of keys that may start an entry now. */
  inRing: boolean;
  /** Redis refused its slot: asked again once this timer fires. */
  retry: ReturnType<typeof setTimeout> | undefined;
  refusals: number;
}

const waiting = (k: FairKey): number => k.entries.length - k.head;

/**
 * A fair pattern's way to settle (`fair`): fetched entries wait in a queue per key, and the keys with
 * an entry that may start are served round-robin, one entry a turn, `concurrency` handlers at once,
 * at most `inHand` of one key, counted by the whole group in Redis (one slot per entry in hand, leased
 * on Redis' clock, renewed while its handler runs). The fetch steps hand entries over with `accept`,
 * which returns while few keys have an entry that may start, so the reads go on past a deep backlog of one
 * key to the others' entries (up to MAX_FAIR_HELD entries and MAX_FAIR_HELD_BYTES held). An entry starts only while
 * the lease confirms it is still this consumer's. A failed entry leaves its
 * queue for its retry (custody's), and holds no slot while it waits; its key's later entries go on.
 */
export class FairQueues {
  private readonly keys = new Map<string | undefined, FairKey>();
  /** Keys that may start an entry now, in turn order (a deque: `ringHead` is the next turn). */
  private ring: FairKey[] = [];
  private ringHead = 0;
  /** Ids held here (waiting or running): a re-delivery of one (a reclaim of an entry held here) is not run twice. */
  private readonly heldIds = new Set<string>();
  private waitingCount = 0;
  /** Bytes of the entries waiting (see MAX_FAIR_HELD_BYTES). */
  private waitingBytes = 0;
  /** Keys in the ring (that may start an entry now). */
  private readyKeys = 0;
  /** Entries read so far and their bytes: what a read's size is measured by. */
  private readEntries = 0;
  private readBytes = 0;
  /** Ids of waiting entries whose delivery count was put back (see uncountWaiting). */
  private readonly uncounted = new Set<string>();
  private running = 0;
  /** Slots taken and not given back (member → slot): renewed while their handlers run. */
  private readonly slotsHeld = new Map<string, KeySlot>();
  private toGive: KeySlot[] = [];
  private giveQueued = false;
  private ackQueue: { entry: StreamEntry; event: SettledEvent }[] = [];
  private acking = false;
  /** A Redis failure (an ack, a dead-letter move): the loop restarts; until then nothing starts. */
  private failure: unknown;
  private roomWaiters: (() => void)[] = [];
  private idleWaiters: (() => void)[] = [];
  /** Put back while paused: told once per pause. */
  private pausedTold = false;
  /** Redis refused the slots script since the last slot taken: told once. */
  private refusedTold = false;

  /** Uncounted entries starting now, counted again in one round trip. */
  private readonly recounts: RecountBatch;

  constructor(private readonly d: FairQueuesDeps) {
    this.recounts = new RecountBatch(d.recount);
  }

  /** Hands fetched entries to their keys' queues; resolves once more may be read (or the loop must restart: it rejects). */
  async accept(entries: readonly StreamEntry[], source: DeliverySource): Promise<void> {
    this.rethrow();
    const keys = await this.d.keysOf(entries);
    for (let i = 0; i < entries.length; i++) this.enqueue(entries[i]!, source, keys[i]);
    this.pump();
    this.putBackIfBarred();
    while (!this.hasRoom()) {
      await new Promise<void>((resolve) => this.roomWaiters.push(resolve));
      this.rethrow();
    }
  }

  /** A failure met while settling (Redis: an ack, a dead-letter move) ends the loop's run: it restarts, and self-drain reads the rest again. */
  rethrow(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /** Resolves once no handler runs and no ack is in flight. */
  async settled(): Promise<void> {
    while (this.running > 0 || this.acking) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** After `settled()`: every queue forgotten (a restart: self-drain reads the pending entries again); the entries dropped. */
  clear(): StreamEntry[] {
    const dropped: StreamEntry[] = [];
    for (const k of this.keys.values()) {
      for (let i = k.head; i < k.entries.length; i++) dropped.push(k.entries[i]!.entry);
      if (k.retry) clearTimeout(k.retry);
    }
    this.keys.clear();
    this.ring = [];
    this.ringHead = 0;
    this.heldIds.clear();
    this.waitingCount = 0;
    this.waitingBytes = 0;
    this.readyKeys = 0;
    this.uncounted.clear();
    this.failure = undefined;
    this.wakeRoom();
    return dropped;
  }

  /** A pause began or ended: what waits of a paused stream goes back to the group, uncounted; a resume starts what may start. */
  nudge(): void {
    this.putBackIfBarred();
    if (!this.d.barred()) this.pausedTold = false;
    this.pump();
    this.wakeRoom();
  }

  /** Renews the slots of entries in hand (every lease renewal): a slot found run out is told (the key may run more than `inHand` meanwhile). */
  async keepSlots(): Promise<void> {
    const slots = [...this.slotsHeld.values()];
    if (slots.length === 0) return;
    const kept = await this.d.slots.keep(slots);
    const lost = slots.filter((s, i) => !kept[i] && this.slotsHeld.has(s.member));
    if (lost.length > 0)
      this.d.logger.warn(
        `the slots of ${lost.length} entries in hand of "${this.d.pattern}" (key ${preview(lost[0]!.key)}${lost.length > 1 ? ' …' : ''}) ran out before their handlers ended (this worker could not renew them within minIdleMs): other workers may have run more than fair.inHand of those keys meanwhile`,
      );
  }

  /**
   * The park's COUNT: FAIR_READ_COUNT (or what is asked, if more), fewer when the entries read so far are large
   * (FAIR_READ_BYTES a read), never below what was asked.
   */
  readSize(asked: number): number {
    const average = this.readEntries === 0 ? 0 : this.readBytes / this.readEntries;
    const fit = average === 0 ? FAIR_READ_COUNT : Math.floor(FAIR_READ_BYTES / average);
    return Math.max(asked, Math.min(FAIR_READ_COUNT, fit));
  }

  /**
   * Every lease renewal: entries that have waited here since before the last one get their delivery count put back
   * (one round trip), so that a crash of this worker costs what waits no delivery (maxDeliveries counts runs, not
   * waits); each is counted again as it starts (recount). What starts within a renewal of its read keeps its count.
   */
  async uncountWaiting(olderThanMs: number): Promise<void> {
    const before = performance.now() - olderThanMs;
    const fresh: StreamEntry[] = [];
    for (const k of this.keys.values())
      for (let i = k.head; i < k.entries.length; i++) {
        const q = k.entries[i]!;
        if (q.readAt <= before && !this.uncounted.has(q.entry.id)) fresh.push(q.entry);
      }
    if (fresh.length === 0) return;
    for (const e of fresh) this.uncounted.add(e.id);
    await this.d.putBack(fresh, 0).catch((err: unknown) => {
      // Still counted: a crash now costs them a delivery, as it did before they waited.
      for (const e of fresh) this.uncounted.delete(e.id);
      this.d.logger.warn(
        `could not put back the delivery counts of ${fresh.length} entries waiting in the fair queues of "${this.d.pattern}": ${describeError(err)}`,
      );
    });
  }

  /** Entries read and waiting here (not started), every key. */
  get held(): number {
    return this.waitingCount;
  }

  /** Keys with entries waiting or running here. */
  get keyCount(): number {
    return this.keys.size;
  }

  /** At a stop, once what runs finished: what waits goes back to the group (idle `handBackIdleMs`), with the delivery count it had before the read. */
  async handBackWaiting(): Promise<void> {
    const rest = this.clear();
    if (rest.length === 0) return;
    for (const entry of rest) this.d.custody.release(entry);
    await this.d.putBack(rest, this.d.handBackIdleMs);
  }

  private enqueue(entry: StreamEntry, source: DeliverySource, key: string | undefined): void {
    if (this.heldIds.has(entry.id)) {
      // Held here already (a reclaim of an entry that waits, self-drain meeting one): it runs once. A copy that waits
      // gives its place to this delivery, which is ours now with its count (the copy held may be lost: an operator's or
      // a peer's claim that this reclaim took back); a copy that runs stays the one.
      const q = this.waitingCopy(key, entry.id);
      if (!q) return this.d.custody.release(entry);
      this.d.custody.release(q.entry);
      this.uncounted.delete(entry.id);
      const bytes = entryBytes(entry);
      this.waitingBytes += bytes - q.bytes;
      Object.assign(q, { entry, source, bytes });
      return;
    }
    let k = this.keys.get(key);
    if (!k) {
      const slotKey = key === undefined ? undefined : this.d.slots.slotKeyOf(key);
      k = { key, slotKey, entries: [], head: 0, running: 0, inRing: false, retry: undefined, refusals: 0 };
      this.keys.set(key, k);
    }
    const bytes = entryBytes(entry);
    k.entries.push({ entry, source, readAt: performance.now(), bytes });
    this.heldIds.add(entry.id);
    this.waitingCount++;
    this.waitingBytes += bytes;
    this.readEntries++;
    this.readBytes += bytes;
    this.toRing(k);
  }

  /** The waiting copy of `id` in `key`'s queue (a scan: only a re-delivery of an entry held here looks). */
  private waitingCopy(key: string | undefined, id: string): Queued | undefined {
    const k = this.keys.get(key);
    if (!k) return undefined;
    for (let i = k.head; i < k.entries.length; i++) if (k.entries[i]!.entry.id === id) return k.entries[i];
    return undefined;
  }

  /** Most of a key's entries running at once here: `inHand` (the group's bound), the keyless group `concurrency`. */
  private capOf(k: FairKey): number {
    return k.key === undefined ? this.d.concurrency : this.d.inHand;
  }

  private mayStart(k: FairKey): boolean {
    return waiting(k) > 0 && k.running < this.capOf(k) && k.retry === undefined;
  }

  private toRing(k: FairKey): void {
    if (k.inRing || !this.mayStart(k)) return;
    k.inRing = true;
    this.readyKeys++;
    this.ring.push(k);
  }

  private nextTurn(): FairKey | undefined {
    while (this.ringHead < this.ring.length) {
      const k = this.ring[this.ringHead++]!;
      k.inRing = false;
      this.readyKeys--;
      if (this.ringHead > 1024 && this.ringHead * 2 > this.ring.length) {
        this.ring = this.ring.slice(this.ringHead);
        this.ringHead = 0;
      }
      if (this.mayStart(k)) return k;
    }
    return undefined;
  }

  private take(k: FairKey): Queued {
    const q = k.entries[k.head]!;
    k.entries[k.head++] = undefined as unknown as Queued;
    if (k.head > 1024 && k.head * 2 > k.entries.length) {
      k.entries = k.entries.slice(k.head);
      k.head = 0;
    }
    this.waitingCount--;
    this.waitingBytes -= q.bytes;
    return q;
  }

  /** A taken entry back at the head of its key's queue (it does not start now). */
  private unTake(k: FairKey, q: Queued): void {
    k.entries[--k.head] = q;
    this.waitingCount++;
    this.waitingBytes += q.bytes;
  }

  /** The key takes no turn for `ms` (its slot refused, its next entry waiting for the lease's answer). */
  private pauseKey(k: FairKey, ms: number): void {
    if (k.retry !== undefined) return;
    k.retry = setTimeout(() => {
      k.retry = undefined;
      this.toRing(k);
      this.pump();
      this.wakeRoom();
    }, ms);
  }

  /** Forgets a key with nothing waiting, running or pending a retry. */
  private forgetIfIdle(k: FairKey): void {
    if (waiting(k) === 0 && k.running === 0 && k.retry === undefined && this.keys.get(k.key) === k) this.keys.delete(k.key);
  }

  /** Starts entries while handlers are free: one entry a key's turn, round-robin; a key's slots asked for in one round trip. */
  private pump(): void {
    if (this.failure !== undefined || this.d.stop.stopped || this.d.barred()) return;
    const keyed: { k: FairKey; q: Queued; slot: KeySlot }[] = [];
    while (this.running < this.d.concurrency) {
      const k = this.nextTurn();
      if (!k) break;
      const q = this.take(k);
      const confirmedAt = this.d.custody.confirmedAt(q.entry);
      if (confirmedAt === undefined) {
        // No longer this consumer's (the lease found it gone: a peer took it over, an operator claimed or acked it).
        this.heldIds.delete(q.entry.id);
        this.uncounted.delete(q.entry.id);
        this.toRing(k);
        this.forgetIfIdle(k);
        continue;
      }
      if (performance.now() - confirmedAt > this.d.staleAfterMs) {
        // Not confirmed ours for longer than a peer may wait (a freeze): the lease's next answer says whose it is.
        this.unTake(k, q);
        this.pauseKey(k, STALE_RETRY_MS);
        continue;
      }
      k.running++;
      this.running++;
      // Its next turn after every other key's with an entry waiting.
      this.toRing(k);
      if (k.key === undefined) void this.run(k, q, undefined);
      else keyed.push({ k, q, slot: { key: k.key, slotKey: k.slotKey!, member: `${q.entry.stream}\n${q.entry.id}` } });
    }
    if (keyed.length > 0) void this.takeSlots(keyed);
  }

  private async takeSlots(starting: { k: FairKey; q: Queued; slot: KeySlot }[]): Promise<void> {
    let taken: boolean[];
    let refused = false;
    try {
      // The slots of handlers that ended meanwhile go back in the same round trip.
      taken = await this.d.slots.exchange(
        this.toGive.splice(0),
        starting.map((s) => s.slot),
      );
      this.refusedTold = false;
    } catch (err) {
      taken = starting.map(() => false);
      if (isRefusal(err)) {
        // Redis refusing the script (an ACL without its rights): a restart would only count the entries' deliveries
        // again. They wait here, asked again at the longest interval, and the operator is told once what is missing.
        refused = true;
        if (!this.refusedTold) {
          this.refusedTold = true;
          this.d.logger.error(
            `could not take a slot of the fair groups of "${this.d.pattern}": ${describeError(err)}; the consumer needs +zadd +zrem +zcard +zscore +zremrangebyscore +pexpire +pttl on ~${this.d.slotKeys} (docs/guide/security.md). Its entries wait, asked again every ${SLOT_RETRY_MAX_MS} ms`,
          );
        }
      } else {
        // Redis failing: the loop restarts (these go back to waiting, self-drain reads them again).
        this.failure ??= err;
      }
    }
    for (let i = 0; i < starting.length; i++) {
      const { k, q, slot } = starting[i]!;
      if (taken[i] && this.failure === undefined && !this.d.stop.stopped) {
        k.refusals = 0;
        this.slotsHeld.set(slot.member, slot);
        void this.run(k, q, slot);
        continue;
      }
      if (taken[i]) this.toGive.push(slot);
      // Refused (other workers hold the key's inHand), or no longer to start: it waits again, first of its key.
      this.unTake(k, q);
      k.running--;
      this.running--;
      if (!taken[i] && this.failure === undefined)
        this.pauseKey(k, refused ? SLOT_RETRY_MAX_MS : Math.min(SLOT_RETRY_MAX_MS, SLOT_RETRY_MIN_MS * 2 ** Math.min(k.refusals++, 10)));
    }
    this.giveSoon();
    this.ended();
  }

  /** One entry: decided, its slot given back, its ack sent with what else finished meanwhile. */
  private async run(k: FairKey, q: Queued, slot: KeySlot | undefined): Promise<void> {
    const { entry, source } = q;
    const progress: BatchProgress = { entries: [entry], next: 1, startedAt: [performance.now()] };
    let event: SettledEvent | undefined;
    try {
      if (this.uncounted.has(entry.id)) {
        await this.recount(entry);
        // Frozen meanwhile (its recount was on its way): the lease's next answer says whose it is, as at the pump.
        const confirmedAt = this.d.custody.confirmedAt(entry);
        if (confirmedAt === undefined || performance.now() - confirmedAt > this.d.staleAfterMs) return this.notStarted(k, q, slot);
      }
      this.d.inProgress.add(progress);
      event = await this.d.decide(entry, source);
    } catch (err) {
      // Redis failed while deciding (a dead-letter move): still pending; the loop restarts and self-drain runs it again.
      this.failure ??= err;
    }
    this.d.inProgress.delete(progress);
    if (this.d.stop.abandoned) return;
    this.giveBack(slot);
    k.running--;
    this.running--;
    this.heldIds.delete(entry.id);
    this.uncounted.delete(entry.id);
    if (event?.outcome === 'acked') {
      this.ackQueue.push({ entry, event });
      if (!this.acking) void this.sendAcks();
    } else if (event) {
      this.d.custody.settledUnacked(entry, event);
    }
    this.toRing(k);
    this.forgetIfIdle(k);
    this.pump();
    this.ended();
  }

  /** A slot this worker held, given back with the next exchange. */
  private giveBack(slot: KeySlot | undefined): void {
    if (!slot) return;
    this.slotsHeld.delete(slot.member);
    this.toGive.push(slot);
    this.giveSoon();
  }

  /** A taken entry that does not start after all: its slot given back, first of its key again (or dropped, gone), its key's turn later. */
  private notStarted(k: FairKey, q: Queued, slot: KeySlot | undefined): void {
    this.giveBack(slot);
    k.running--;
    this.running--;
    if (this.d.custody.confirmedAt(q.entry) === undefined) this.heldIds.delete(q.entry.id);
    else this.unTake(k, q);
    this.pauseKey(k, STALE_RETRY_MS);
    this.pump();
    this.ended();
  }

  /**
   * An entry whose count was put back while it waited is counted again as it starts, with the count it was read
   * with (otherwise its run costs no delivery, and a poison entry that kills the worker would run forever): one round
   * trip for the entries that start together. Rejects when Redis failed or the entry is no longer pending under
   * this consumer: the loop restarts, and self-drain decides.
   */
  private async recount(entry: StreamEntry): Promise<void> {
    await this.recounts.count(entry);
    this.uncounted.delete(entry.id);
  }

  /**
   * The slots of handlers that ended, given back with the next slots taken (pump runs right after an end), or alone
   * a microtask later when nothing started meanwhile. A failure only keeps a key's slot from the others until its lease runs out.
   */
  private giveSoon(): void {
    if (this.giveQueued || this.toGive.length === 0) return;
    this.giveQueued = true;
    queueMicrotask(() => {
      this.giveQueued = false;
      const slots = this.toGive.splice(0);
      if (slots.length === 0) return;
      this.d.slots.exchange(slots, []).catch((err: unknown) => {
        this.d.logger.warn(
          `could not give back ${slots.length} slots of "${this.d.pattern}": ${describeError(err)}; their keys take no other entry of the group until minIdleMs ran out`,
        );
      });
    });
  }

  /** Acks of entries that succeeded: one round trip for what finished meanwhile (the pipeline keeps one in flight). */
  private async sendAcks(): Promise<void> {
    this.acking = true;
    while (this.ackQueue.length > 0) {
      const batch = this.ackQueue.splice(0);
      try {
        await this.d.acks.send(
          batch.map((a) => a.entry),
          batch.map((a) => a.event),
        );
      } catch (err) {
        // An earlier ack failed: its entries are still pending; the loop restarts and self-drain runs them again.
        this.failure ??= err;
      }
    }
    this.acking = false;
    this.ended();
  }

  /** What waits goes back to the group while the stream is paused (a pause costs no delivery), in one round trip. */
  private putBackIfBarred(): void {
    if (!this.d.barred() || this.waitingCount === 0) return;
    const rest: StreamEntry[] = [];
    for (const [key, k] of this.keys) {
      for (let i = k.head; i < k.entries.length; i++) {
        const { entry } = k.entries[i]!;
        rest.push(entry);
        this.heldIds.delete(entry.id);
        this.uncounted.delete(entry.id);
        this.d.custody.release(entry);
      }
      k.entries = [];
      k.head = 0;
      if (k.running === 0) {
        if (k.retry) clearTimeout(k.retry);
        this.keys.delete(key);
      }
    }
    this.waitingCount = 0;
    this.waitingBytes = 0;
    const { logger, stop, handBackIdleMs } = this.d;
    if (!this.pausedTold) {
      this.pausedTold = true;
      logger.log(`${idList(rest)} put back to the group (paused): they are read again after the resume`);
    }
    void stop
      .bounded(this.d.putBack(rest, handBackIdleMs), () => `the put-back of ${idList(rest)} (paused)`, logger)
      .catch((err: unknown) =>
        logger.warn(`could not put back ${idList(rest)} (paused): ${describeError(err)}; they come back once idle ${handBackIdleMs} ms`),
      );
    this.wakeRoom();
  }

  /**
   * More may be read while fewer than READY_KEYS keys (or two rounds of `concurrency`) have an entry that may start:
   * a key's backlog, however deep, counts once, so the reads go on past it to the other keys' entries; keys at their
   * `inHand` or waiting for a slot do not count. Within MAX_FAIR_HELD entries and MAX_FAIR_HELD_BYTES held. At once
   * when the loop must end its run (a failure, a stop) or the stream is paused.
   */
  private hasRoom(): boolean {
    if (this.failure !== undefined || this.d.stop.stopped || this.d.barred()) return true;
    if (this.waitingCount >= MAX_FAIR_HELD || this.waitingBytes >= (this.d.maxHeldBytes ?? MAX_FAIR_HELD_BYTES)) return false;
    return this.readyKeys < Math.max(READY_KEYS, 2 * this.d.concurrency);
  }

  private ended(): void {
    if (this.hasRoom()) for (const wake of this.roomWaiters.splice(0)) wake();
    if (this.running === 0 && !this.acking) for (const wake of this.idleWaiters.splice(0)) wake();
  }

  private wakeRoom(): void {
    if (this.hasRoom()) for (const wake of this.roomWaiters.splice(0)) wake();
  }
}
