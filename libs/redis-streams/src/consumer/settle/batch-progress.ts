// Imported, not the global: `performance` on globalThis is a getter Node runs on every use (here, per entry).
import { performance } from 'node:perf_hooks';
import type { StreamEntry } from '../../stream-entry.js';

/**
 * One fetched batch being settled, and how far it got: written by the settler (settleBatch), read
 * by the stuck watch and by `close()` (what to hand back after a hung handler).
 */
export interface BatchProgress {
  readonly entries: readonly StreamEntry[];
  /** Entries before this index have had their handler called. */
  next: number;
  /** By index: when the entry's handler was called (performance.now()), NaN when it is not running (see StuckWatch). */
  readonly startedAt: number[];
}

/**
 * The handlers of `progress.entries[from..to)` were called (one call, or one entry): their start
 * in the batch's own array, not on each entry (one clock read, a number stored per entry).
 */
export function handlerStarted(progress: BatchProgress, from: number, to: number): void {
  const at = performance.now();
  for (let i = from; i < to; i++) progress.startedAt[i] = at;
}

/** Their handler settled. A rejection leaves the marks: the batch, and so the watch's view of it, ends then. */
export function handlerEnded(progress: BatchProgress, from: number, to: number): void {
  for (let i = from; i < to; i++) progress.startedAt[i] = NaN;
}
