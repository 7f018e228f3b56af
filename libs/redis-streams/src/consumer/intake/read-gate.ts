import type { Observable } from 'rxjs';
import type { StreamEntry } from '../../stream-entry.js';

/** One park's read as a gate sees it: what it may read, how long it may block, and what ends a wait early. */
export interface ReadAsk {
  streams: readonly string[];
  count: number;
  /** 0: no BLOCK. */
  blockMs: number;
  /** A read sent ahead of the batch in hand (read-ahead): it must not park holding what a gate has not granted. */
  ahead: boolean;
  /** The beat's length, for a gate's wait when `blockMs` is 0. */
  beatMs: number;
  /** A batch handler's read for more (fill): its BLOCK is the batch's deadline, kept as asked. */
  filling?: boolean;
  /** XREADGROUP … CLAIM: the read also claims entries idle this long (see ClaimGate); undefined: a plain read. */
  claimMinIdleMs?: number | undefined;
  /** What of the read's reply is kept, before it is leased (the rest is another's to settle). Default: all of it. */
  kept?: ((fetched: StreamEntry[]) => StreamEntry[]) | undefined;
  /** Ends a gate's wait at once: the stop, or a gate's state changing (a pause, a resume). */
  wake$: Observable<unknown>;
}

/** What the read brought. `inHand`: taken past a gate the stop kept from closing; they run even when stopping. */
export interface ReadResult {
  entries: StreamEntry[];
  inHand?: boolean;
}

/** The read itself, or the gates after this one. */
export type ReadNext = (ask: ReadAsk) => Promise<ReadResult>;

/**
 * A gate of the park's read (the reader's intake): it narrows the ask (which streams, how many),
 * waits instead of reading, or reads in steps of its own through `next`. Gates run in the plan's
 * order, the first outermost; the park's code knows this interface only.
 */
export interface ReadGate {
  /**
   * Shapes the park's whole ask before any gate reads, so that every gate decides on it (the claim gate's
   * "no BLOCK after a read that claimed": an outer gate must not park for more on its own).
   */
  shape?(ask: ReadAsk): ReadAsk;
  read(ask: ReadAsk, next: ReadNext): Promise<ReadResult>;
  /** Something that changed the gate's answer (a pause, a resume): a wait of the park ends on it. */
  readonly changed$?: Observable<unknown>;
}

/** The gates in order around the read: each gate's shape of the park's ask, in order, then the first gate's read is the park's. */
export function throughGates(gates: readonly ReadGate[], read: ReadNext): ReadNext {
  const chain = gates.reduceRight<ReadNext>((next, gate) => (ask) => gate.read(ask, next), read);
  const shaping = gates.filter((gate) => gate.shape !== undefined);
  return shaping.length === 0 ? chain : (ask) => chain(shaping.reduce((shaped, gate) => gate.shape!(shaped), ask));
}
