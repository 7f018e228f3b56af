import type { Logger } from '../../ports.js';
import { defer, exhaustMap, ignoreElements, interval, type Observable } from 'rxjs';
import type { StreamCommands } from '../../redis/stream-commands.js';
import { CUSTODY_SLOT, groupIds, type StreamEntry } from '../../stream-entry.js';
import { describeError } from '../../describe-error.js';
import { settleSent } from '../settle/settle-sent.js';
import { counted } from '../../readable.js';

/** The ids of held entries, each once: a group re-created under a read-ahead can deliver an id twice, as two objects. */
const distinctIds = (held: readonly StreamEntry[]): string[] => [...new Set(held.map((e) => e.id))];

/**
 * The lease's mark on an entry: the entry's custody slot (declared by the read that made it, see
 * FetchedEntry), so the wire type carries none of the lease's bookkeeping. A property store, not a
 * map: a Map or WeakMap keyed by the entry costs ~10× as much per entry held and dropped (the drain's hot path).
 */
const HOLDING = CUSTODY_SLOT;
type Marked = StreamEntry & { [HOLDING]?: Holding | undefined };
const holdingOf = (entry: StreamEntry): Holding | undefined => (entry as Marked)[HOLDING];
const mark = (entry: StreamEntry, holding: Holding | undefined): void => {
  (entry as Marked)[HOLDING] = holding;
};

/**
 * When a lease last knew `entry` pending under its consumer with its idle reset (performance.now());
 * undefined when none holds it. For a step that has the entry but not the lease (a failure's retry
 * record: was it still this consumer's a moment ago?).
 */
export const leaseConfirmedAt = (entry: StreamEntry): number | undefined => holdingOf(entry)?.confirmedAt;

/**
 * Entries of one stream held together (one fetch): each is marked with its holding, so holding
 * and dropping one costs a store, not a hash-set insert and delete; the holding goes once the
 * last of them is dropped.
 */
class Holding {
  live = 0;

  constructor(
    readonly stream: string,
    readonly entries: readonly StreamEntry[],
    /**
     * performance.now() when its entries were last known pending under this consumer with idle reset: when the fetch or
     * renewal that said so was sent (Redis reset their idle no earlier; its answer may reach the event loop much later).
     */
    public confirmedAt: number,
  ) {}

  /** Its entries still in hand. */
  inHand(): StreamEntry[] {
    return this.entries.filter((e) => holdingOf(e) === this);
  }
}

/**
 * The entries this consumer holds (fetched, not yet settled). Every `renewMs` their idle
 * time is reset on the server, so a peer's XAUTOCLAIM never takes an entry that is still
 * in hand or waiting its turn in the batch, however long its handler runs.
 */
export class Lease {
  /** By stream, the holdings with entries still in hand. */
  private readonly held = new Map<string, Set<Holding>>();
  /** Bumped by `clear()`: a renewal sent before it finds nothing of its answer to act on. */
  private epoch = 0;
  /** The entries of the ack in flight (at most one is, see AckPipeline), until its answer drops them; [] when none. */
  private acking: readonly StreamEntry[] = [];

  constructor(
    private readonly commands: StreamCommands,
    private readonly consumer: string,
    private readonly renewMs: number,
    private readonly logger: Logger,
    /** Held entries a renewal found no longer pending under this consumer (the caller finds out why). */
    private readonly onLost: (stream: string, lost: { entry: StreamEntry; confirmedAt: number }[]) => void = () => {},
  ) {}

  /**
   * Every `renewMs`, the held entries' idle time reset; part of the reader's upkeep, which ends it by
   * unsubscribing. exhaustMap: a slow renewal is never stacked behind another.
   */
  readonly renewals$: Observable<never> = defer(() => interval(this.renewMs)).pipe(
    exhaustMap(() => this.renew()),
    ignoreElements(),
  );

  /** Nothing held any more (a restart: self-drain fetches it again; an abandon: it was handed back). */
  clear(): void {
    this.epoch++;
    // Marks left on entries point at holdings no longer listed: dropping them changes nothing here.
    this.held.clear();
    this.acking = [];
  }

  /** Their XACK is sent. One array per batch, no per-entry work: the hot path. */
  ackSent(entries: readonly StreamEntry[]): void {
    this.acking = entries;
  }

  /** Their ack's answer came (and dropped them). A failed ack leaves them acking: it may have run; the restart clears it. */
  ackConfirmed(entries: readonly StreamEntry[]): void {
    if (this.acking === entries) this.acking = [];
  }

  /**
   * Held entries whose settle (XACK, dead-letter move) has been sent: gone from the pending list
   * because this consumer settled them, so never to be reported lost nor taken back.
   */
  withoutSettling<T extends { entry: StreamEntry }>(items: readonly T[]): T[] {
    const acking = this.acking.length > 0 ? new Set(this.acking) : undefined;
    return items.filter(({ entry }) => !settleSent(entry) && !acking?.has(entry));
  }

  /** Ids held on `stream` (a lookup set, made on each call). */
  idsOn(stream: string): Set<string> {
    return new Set(this.inHand(stream).map((e) => e.id));
  }

  /**
   * Entries fetched, held from now; `sentAt`: when the read, claim or audit that fetched them was sent. Not when its
   * answer came: a worker held up (frozen, its event loop busy) reads an answer late, and a peer may have taken the
   * entries over meanwhile, once idle minIdleMs since Redis answered.
   */
  hold(entries: readonly StreamEntry[], sentAt: number): void {
    // Entries of one stream come in runs: one holding per run.
    for (let from = 0, i = 1; i <= entries.length; i++) {
      if (i < entries.length && entries[i]!.stream === entries[from]!.stream) continue;
      this.holdRun(from === 0 && i === entries.length ? entries : entries.slice(from, i), sentAt);
      from = i;
    }
  }

  /** Ids held, by stream, but for `except` (at abandon: those whose handler was called). */
  heldIds(except: readonly StreamEntry[] = []): Map<string, string[]> {
    const skip = groupIds(except);
    const out = new Map<string, string[]>();
    for (const stream of this.held.keys()) {
      const skipped = new Set(skip.get(stream));
      const rest = distinctIds(this.inHand(stream)).filter((id) => !skipped.has(id));
      if (rest.length > 0) out.set(stream, rest);
    }
    return out;
  }

  entries(): { stream: string; id: string }[] {
    return [...this.held.keys()].flatMap((stream) => distinctIds(this.inHand(stream)).map((id) => ({ stream, id })));
  }

  /** How many entries are held, per stream (distinct ids). */
  counts(): Map<string, number> {
    return new Map([...this.held.keys()].map((stream) => [stream, distinctIds(this.inHand(stream)).length]));
  }

  /** When a held entry was last known pending under this consumer with its idle reset; undefined when not held. */
  confirmedAt(entry: StreamEntry): number | undefined {
    return holdingOf(entry)?.confirmedAt;
  }

  /** A held entry found pending under this consumer again (taken back after a loss). */
  confirm(entry: StreamEntry, at: number): void {
    const holding = holdingOf(entry);
    if (holding) holding.confirmedAt = at;
  }

  drop(entry: StreamEntry): void {
    const holding = holdingOf(entry);
    if (!holding) return;
    mark(entry, undefined);
    if (--holding.live === 0) this.held.get(holding.stream)?.delete(holding);
  }

  /** Entries held but not started when the loop stops: make them idle at once so the next peer's beat takes them. */
  async handBack(entries: readonly StreamEntry[], idleMs: number): Promise<void> {
    for (const e of entries) this.drop(e);
    await this.handBackIds(groupIds(entries), idleMs);
  }

  /** True when Redis confirmed every hand-back. */
  async handBackIds(byStream: Map<string, string[]>, idleMs: number): Promise<boolean> {
    let confirmed = true;
    for (const [stream, ids] of byStream) {
      await this.commands.setIdle(stream, this.consumer, ids, idleMs).catch((err: unknown) => {
        // Still pending under our name: self-drain or a later reclaim recovers them.
        confirmed = false;
        this.logger.warn(`could not hand back ${counted(ids.length, 'entry', 'entries')} of "${stream}": ${describeError(err)}`);
      });
    }
    return confirmed;
  }

  private async renew(): Promise<void> {
    const epoch = this.epoch;
    for (const stream of [...this.held.keys()]) {
      if (epoch !== this.epoch) return;
      const entries = this.inHand(stream);
      if (entries.length === 0) continue;
      try {
        const sentAt = performance.now();
        const owned = new Set(
          await this.commands.setIdle(
            stream,
            this.consumer,
            entries.map((e) => e.id),
            0,
          ),
        );
        // Cleared meanwhile (a restart): what it held is the next run's to fetch, not lost.
        if (epoch !== this.epoch) return;
        // Not ours on the server, still held after the answer, and not settled by us (a settle sent before the renewal ran first).
        const lost = this.withoutSettling(
          entries
            .filter((e) => !owned.has(e.id) && holdingOf(e) !== undefined)
            .map((entry) => ({ entry, confirmedAt: holdingOf(entry)!.confirmedAt })),
        );
        // Each lost entry keeps the time it was last confirmed, in a holding of its own: the renewal of the rest of
        // its fetch must not make it look ours while the audit finds out whose it is (a fair worker thawed after a
        // freeze started such entries, which a peer had taken over).
        for (const { entry, confirmedAt } of lost) this.holdAlone(entry, confirmedAt);
        for (const e of entries) {
          const holding = owned.has(e.id) ? holdingOf(e) : undefined;
          if (holding) holding.confirmedAt = sentAt;
        }
        if (lost.length > 0) this.onLost(stream, lost);
      } catch (err) {
        // Cleared meanwhile (a restart, the reader's end): its failure is nobody's news, and may come after close().
        if (epoch !== this.epoch) return;
        this.logger.warn(`lease renewal on "${stream}" failed: ${describeError(err)}`);
      }
    }
  }

  /** `entry` held on its own, last confirmed at `confirmedAt`. */
  private holdAlone(entry: StreamEntry, confirmedAt: number): void {
    // Alone already (found gone by an earlier renewal, the audit not yet answered): no new holding each renewal.
    if (holdingOf(entry)!.live !== 1) this.holdRun([entry], confirmedAt);
    else holdingOf(entry)!.confirmedAt = confirmedAt;
  }

  private holdRun(run: readonly StreamEntry[], confirmedAt: number): void {
    const holding = new Holding(run[0]!.stream, run, confirmedAt);
    for (const e of run) {
      // Held already (by an earlier fetch, or twice in this one): this holding takes it over.
      if (holdingOf(e) !== undefined) this.drop(e);
      mark(e, holding);
      holding.live++;
    }
    let set = this.held.get(holding.stream);
    if (!set) this.held.set(holding.stream, (set = new Set()));
    set.add(holding);
  }

  /** The entries held on `stream`. */
  private inHand(stream: string): StreamEntry[] {
    const set = this.held.get(stream);
    if (!set) return [];
    const out: StreamEntry[] = [];
    for (const holding of set) for (const e of holding.inHand()) out.push(e);
    return out;
  }
}
