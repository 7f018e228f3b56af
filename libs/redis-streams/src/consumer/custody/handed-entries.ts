import { someIds } from '../../id-list.js';
import { compareIds } from '../../redis/stream-ids.js';
import type { Logger } from '../../ports.js';
import type { StreamCommands } from '../../redis/stream-commands.js';
import type { OwnPendingRow } from '../../redis/replies/replies.js';
import type { DeliveryMarks } from './delivery-marks.js';
import type { Lease } from './lease.js';

export interface HandedEntriesDeps {
  commands: Pick<StreamCommands, 'ownPending'>;
  lease: Pick<Lease, 'idsOn'>;
  marks: DeliveryMarks;
  consumer: string;
  minIdleMs: number;
  /** Checks come every leaseRenewMs / 2. */
  leaseRenewMs: number;
  maxWaitingRetries: number;
  logger: Logger;
}

/**
 * Entries of one stream's pending list looked at per check, at least and at most: the script holds every
 * other client meanwhile. Between, as many as let the whole list be seen within a round (see pageSize).
 */
const ROWS_PER_LOOK = 100;
const MAX_ROWS_PER_LOOK = 1000;

/** Streams looked at in one round trip. */
const STREAMS_PER_ROUND = 200;

/**
 * Streams looked at per check, at least: a reader of more looks at a share of them each time (one per stream
 * per check cost about 3,000 scripts a second at 10,000 streams: review finding), every stream within as few
 * checks as let an entry handed here be seen twice before it is idle minIdleMs (see checksPerRound).
 */
const STREAMS_PER_CHECK = 500;

/**
 * Younger than this, an entry this consumer does not know may be one its own read just delivered,
 * the reply not yet here (the park's lane is another connection): it is looked at again next time.
 */
const SETTLED_MS = 50;

/**
 * Entries handed to this consumer by an operator (an **entry taken in**): an `XCLAIM` by hand puts
 * an entry in its pending list that it never fetched, so nothing here held or owed it, and an
 * `XGROUP DELCONSUMER` of it would drop the entry with nobody to take it back. Each check looks at a
 * page of its own pending list per stream (the next page next time); what it holds and owes none of,
 * found so by two looks at it in a row, is taken in: owed here, as a failed entry of its own is (tried
 * once idle `minIdleMs − leaseRenewMs`), or, when it waits for a retry (its record says so), kept waiting until its due
 * time while there is room (`maxWaitingRetries`; past it a reclaim takes it at its due time).
 * From then on a delete of this consumer loses nothing of it (see PendingAudit). A reader of more than
 * STREAMS_PER_CHECK streams looks at a share of them per check (every stream within checksPerRound checks).
 */
export class HandedEntries {
  /** Per stream, the last id of the page looked at; none: from the first. */
  private readonly after = new Map<string, string>();
  /** Per stream, the rows its current pass over its own pending list has seen so far (in how many looks), and its last whole pass's. */
  private readonly passRows = new Map<string, { now: number; last: number; looks: number }>();
  /**
   * Per stream, entries seen once pending here unknown, with their delivery count: taken in only when the next
   * look at them finds them so again. One sighting is no proof: a read's reply not yet processed here (a busy
   * event loop) shows its entries exactly so, and taking them in ran a batch of 100 twice (cluster.e2e under load).
   */
  private readonly sighted = new Map<string, Map<string, number>>();
  /** Where the next check starts in the list of streams (a reader of many looks at a share of them each time). */
  private next = 0;

  constructor(private readonly d: HandedEntriesDeps) {}

  /**
   * Checks (every leaseRenewMs / 2) in which every stream is looked at once: an entry handed here (idle 0) is
   * first seen within a round and again at the next check, both before it is idle minIdleMs, past which it is
   * the group's: (rounds + 1) × leaseRenewMs / 2 < minIdleMs, with two checks to spare (3 at the default 1:3):
   * on a busy machine a look of thousands of streams takes most of a check, and the next tick is skipped.
   */
  private checksPerRound(): number {
    return Math.max(1, Math.floor((2 * this.d.minIdleMs) / this.d.leaseRenewMs) - 3);
  }

  /**
   * Rows of `stream`'s own pending list looked at now: its whole list within the round (within one look when
   * it is one of a share, looked at once a round), from what its last whole pass saw or what this consumer
   * holds and owes there, whichever is more, between the bounds.
   * (A list of 500 owed entries read 100 at a time took six checks to reach an entry handed here behind them.)
   */
  private pageSize(stream: string, looksPerRound: number): number {
    const pass = this.passRows.get(stream);
    // The list is at least what this consumer holds and owes there: known at once, before any whole pass (a list
    // that just grew to 2,500 paged from 100 up took six checks to see its end: review finding).
    const known = this.d.marks.owedOn(stream) + this.d.lease.idsOn(stream).size;
    // What is left of it over the looks left of the round, so that a pass begun on a shorter list still ends within
    // the round; mid-pass, at least what the pass has seen so far: a list longer than both doubles the page each look.
    const left = Math.max(pass?.last ?? 0, known) - (pass?.now ?? 0);
    const wanted = Math.max(Math.ceil(left / Math.max(1, looksPerRound - (pass?.looks ?? 0))), pass?.now ?? 0);
    return Math.min(MAX_ROWS_PER_LOOK, Math.max(ROWS_PER_LOOK, wanted));
  }

  /** Looks at `streams` (drained, not paused); what it takes in is on the marks' schedule. */
  async look(all: readonly string[]): Promise<void> {
    const { d } = this;
    const share = Math.max(STREAMS_PER_CHECK, Math.ceil(all.length / this.checksPerRound()));
    if (this.next >= all.length) this.next = 0;
    let streams =
      all.length <= share
        ? all
        : [...all.slice(this.next, this.next + share), ...all.slice(0, Math.max(0, this.next + share - all.length))];
    this.next = all.length <= share ? 0 : (this.next + share) % all.length;
    const looksPerRound = streams.length < all.length ? 1 : this.checksPerRound();
    // A stream with an entry seen once is looked at again now, first, whatever the share: the second sighting must
    // come before minIdleMs.
    if (streams.length < all.length && this.sighted.size > 0) {
      const again = all.filter((s) => this.sighted.has(s));
      const first = new Set(again);
      streams = [...again, ...streams.filter((s) => !first.has(s))];
    }
    // Per stream, the pass's page; for a stream with an entry seen once, first a look at that entry's page, which
    // leaves the pass where it was (the pass goes on the same check: new work seen there must not hold it back).
    const looks = streams.flatMap((stream) => {
      const count = this.pageSize(stream, looksPerRound);
      const after = this.after.get(stream);
      const pass = { stream, start: after === undefined ? '-' : `(${after}`, after, count, again: false };
      const first = this.firstSighting(stream);
      return first === undefined ? [pass] : [{ stream, start: first, after: undefined, count, again: true }, pass];
    });
    // What earlier checks saw: a second sighting must come from a later look than the first, never the same check.
    const prior = new Map(this.sighted);
    for (let i = 0; i < looks.length; i += STREAMS_PER_ROUND) {
      const round = looks.slice(i, i + STREAMS_PER_ROUND);
      const sentAt = performance.now();
      const pages = await d.commands.ownPending(round, d.consumer);
      pages.forEach((rows, j) => this.found(round[j]!, rows, prior.get(round[j]!.stream), sentAt));
    }
  }

  /** The earliest entry of `stream` seen once, if any. */
  private firstSighting(stream: string): string | undefined {
    let first: string | undefined;
    for (const id of this.sighted.get(stream)?.keys() ?? []) if (first === undefined || compareIds(id, first) < 0) first = id;
    return first;
  }

  /** What one look found: the pass moves on (not for a look at a sighting), sightings are kept, confirmed or over. */
  private found(
    look: { stream: string; after: string | undefined; count: number; again: boolean },
    rows: OwnPendingRow[] | null,
    prior: ReadonlyMap<string, number> | undefined,
    sentAt: number,
  ): void {
    const { d } = this;
    const { stream, after: from, count } = look;
    const full = rows !== null && rows.length === count;
    if (!look.again) {
      // Gone (NOGROUP, the stream deleted): the loop's own path finds out.
      if (!full) this.after.delete(stream);
      else this.after.set(stream, rows.at(-1)!.id);
      const pass = this.passRows.get(stream) ?? { now: 0, last: 0, looks: 0 };
      pass.now += rows?.length ?? 0;
      pass.looks++;
      if (!full) {
        pass.last = pass.now;
        pass.now = 0;
        pass.looks = 0;
      }
      if (pass.last === 0 && pass.now === 0) this.passRows.delete(stream);
      else this.passRows.set(stream, pass);
    }
    // Sightings this page covered and did not confirm are over (settled, taken by a peer, fetched since).
    const to = full ? rows.at(-1)!.id : undefined;
    const before = this.sighted.get(stream);
    const now = new Map<string, number>();
    if (before && rows !== null)
      for (const [id, n] of before)
        if ((from !== undefined && compareIds(id, from) <= 0) || (to !== undefined && compareIds(id, to) > 0)) now.set(id, n);
    if (rows === null || rows.length === 0) {
      if (now.size > 0) this.sighted.set(stream, now);
      else this.sighted.delete(stream);
      return;
    }
    // As the answer comes: every settle of ours goes on the connection this look did, so one sent before
    // it ran first (not listed) and one sent after is still held (the lease keeps an entry until its ack is confirmed).
    const held = d.lease.idsOn(stream);
    const taken: string[] = [];
    for (const r of rows) {
      // Idle minIdleMs or more: handed back to the group (a stop, a pause's put-back), any reclaim's to take.
      if (r.idleMs < SETTLED_MS || r.idleMs >= d.minIdleMs || held.has(r.id) || d.marks.owes(stream, r.id)) continue;
      // First seen so (or delivered again since): looked at again next time.
      if (prior?.get(r.id) !== r.deliveryCount) {
        now.set(r.id, r.deliveryCount);
        continue;
      }
      if (r.dueInMs !== undefined) {
        // Below maxWaitingRetries, as a reclaim's adoptions stay (this consumer's own failures may fill it; see withoutWaiting).
        if (d.marks.waiting >= d.maxWaitingRetries - 1) continue;
        d.marks.adopt(stream, r.id, r.deliveryCount, Math.max(0, r.dueInMs));
      } else if (!d.marks.takeIn(stream, r.id, r.deliveryCount, sentAt, r.idleMs)) continue;
      taken.push(r.id);
    }
    if (now.size > 0) this.sighted.set(stream, now);
    else this.sighted.delete(stream);
    if (taken.length > 0)
      d.logger.warn(
        `${taken.length === 1 ? 'entry' : 'entries'} ${someIds(taken)} of "${stream}" ${taken.length === 1 ? 'is' : 'are'} pending under this consumer, which never fetched ${taken.length === 1 ? 'it' : 'them'} (an XCLAIM by hand): taken in, owed here`,
      );
  }
}
