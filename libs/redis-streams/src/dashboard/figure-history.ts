/**
 * The figures the dashboard's charts draw (lag, pending, dead letters, entries added and read), kept in
 * the dashboard's process for the last `keepMs`, so that a page opened after an incident starts with them.
 * Bounded: one fixed ring per stream of ceil(keepMs / intervalMs) + 1 slots of 36 bytes, for at most
 * `streams` streams (the one seen least recently is forgotten first). No Redis call of its own: fed by the
 * overview's reads and by the dashboard's sampler (dashboard-data.ts).
 */

/** One stream's figures at one moment: sums over its groups (and its dead-letter streams). */
export interface FigureSample {
  lag: number | null;
  pending: number;
  dead: number;
  /** The stream's entries-added: produced rates are its differences. */
  added: number;
  /** Entries its groups have read, summed; null when some group's is unknown (no rate then). */
  read: number | null;
}

/** A chart's past: times (Unix ms, oldest first) and, per figure, its value at each (null: unknown). */
export interface HistorySeries {
  at: number[];
  lag: (number | null)[];
  pending: (number | null)[];
  dead: (number | null)[];
  /** Entries added per second since the slot before (null for a stream's first slot). */
  produced: (number | null)[];
  consumed: (number | null)[];
}

export interface HistoryLimits {
  intervalMs: number;
  keepMs: number;
  streams: number;
}

/** Bytes a slot takes: its sample's time (Float64), added and read (Float64), lag, pending and dead (Float32). */
export const SLOT_BYTES = 8 + 16 + 12;
/** Bytes a stream's ring takes beside its slots: the ring, its three typed arrays and its map entry (measured ~750). */
export const RING_BYTES = 1024;

class Ring {
  /** Each slot's sample time (Unix ms), or -1: the slot it is in is floor(at / intervalMs). */
  readonly at: Float64Array;
  readonly counters: Float64Array;
  readonly counts: Float32Array;
  constructor(readonly size: number) {
    this.at = new Float64Array(size).fill(-1);
    this.counters = new Float64Array(size * 2);
    this.counts = new Float32Array(size * 3);
  }
}

export class FigureHistory {
  private readonly rings = new Map<string, Ring>();
  private readonly size: number;

  constructor(readonly limits: HistoryLimits) {
    this.size = Math.ceil(limits.keepMs / limits.intervalMs) + 1;
  }

  /** The slot (a number of intervals since 1970) a moment falls in. */
  slotOf(at: number): number {
    return Math.floor(at / this.limits.intervalMs);
  }

  /** Whether `stream` already has a sample in the slot of `at` (the sampler then leaves it). */
  has(stream: string, at: number): boolean {
    const ring = this.rings.get(stream);
    const slot = this.slotOf(at);
    return ring !== undefined && this.holds(ring, slot);
  }

  private holds(ring: Ring, slot: number): boolean {
    const at = ring.at[slot % this.size]!;
    return at >= 0 && this.slotOf(at) === slot;
  }

  /**
   * Keeps `sample` as `stream`'s figures in the slot of `at` (a later one in the same slot replaces it). With
   * `admit: false` (a page's read) a stream not kept yet is kept only while there is room: paging through streams
   * past the first `streams` must not forget the past of those the sampler keeps.
   */
  record(stream: string, at: number, sample: FigureSample, { admit = true }: { admit?: boolean } = {}): void {
    let ring = this.rings.get(stream);
    if (ring) this.rings.delete(stream);
    else {
      if (!admit && this.rings.size >= this.limits.streams) return;
      ring = new Ring(this.size);
      if (this.rings.size >= this.limits.streams) this.rings.delete(this.rings.keys().next().value!);
    }
    // Seen most recently last: the first in the map is the one to forget.
    this.rings.set(stream, ring);
    const slot = this.slotOf(at);
    const i = slot % this.size;
    ring.at[i] = at;
    ring.counters[i * 2] = sample.added;
    ring.counters[i * 2 + 1] = sample.read ?? NaN;
    ring.counts[i * 3] = sample.lag ?? NaN;
    ring.counts[i * 3 + 1] = sample.pending;
    ring.counts[i * 3 + 2] = sample.dead;
  }

  /** Streams kept, and the bytes their rings take. */
  get footprint(): { streams: number; bytes: number } {
    let names = 0;
    for (const name of this.rings.keys()) names += name.length;
    return { streams: this.rings.size, bytes: this.rings.size * (this.size * SLOT_BYTES + RING_BYTES) + names };
  }

  /**
   * The figures of `streams` summed per slot over the last keepMs before `now`, oldest first: a slot
   * shows the streams sampled in it (a stream with none there adds nothing), each rate from that
   * stream's sample in the slot before it (none: unknown).
   */
  series(streams: readonly string[], now: number): HistorySeries {
    const last = this.slotOf(now);
    const first = last - this.size + 1;
    const out: HistorySeries = { at: [], lag: [], pending: [], dead: [], produced: [], consumed: [] };
    for (let slot = first; slot <= last; slot++) {
      const i = slot % this.size;
      let seen = false;
      let lag: number | null = 0;
      let [pending, dead, produced, consumed] = [0, 0, 0 as number | null, 0 as number | null];
      for (const name of streams) {
        const ring = this.rings.get(name);
        if (!ring || !this.holds(ring, slot)) continue;
        seen = true;
        const l = ring.counts[i * 3]!;
        lag = lag === null || Number.isNaN(l) ? null : lag + l;
        pending += ring.counts[i * 3 + 1]!;
        dead += ring.counts[i * 3 + 2]!;
        const j = (slot - 1) % this.size;
        const before = this.holds(ring, slot - 1);
        const seconds = (ring.at[i]! - ring.at[j]!) / 1000;
        // A counter that fell (a stream made again, a group reset) gives no rate rather than a negative one.
        const rate = (k: number) => {
          const d = ring.counters[i * 2 + k]! - ring.counters[j * 2 + k]!;
          return before && seconds > 0 && d >= 0 ? d / seconds : null;
        };
        const p = rate(0);
        const c = rate(1);
        produced = produced === null || p === null ? null : produced + p;
        consumed = consumed === null || c === null || Number.isNaN(c) ? null : consumed + c;
      }
      if (!seen) continue;
      out.at.push(slot * this.limits.intervalMs);
      out.lag.push(lag);
      out.pending.push(pending);
      out.dead.push(dead);
      out.produced.push(produced);
      out.consumed.push(consumed);
    }
    return out;
  }
}
