// Imported, not the global: `performance` on globalThis is a getter Node runs on every use (here, per entry).
import { performance } from 'node:perf_hooks';
import { defer, ignoreElements, interval, tap, type Observable } from 'rxjs';
import { someIds } from '../../id-list.js';
import type { Logger } from '../../ports.js';
import type { StreamEntry } from '../../stream-entry.js';
import type { BatchProgress } from '../settle/batch-progress.js';

/** When a stuck entry was last reported (performance.now()): a slot on the entry, set only then. */
const REPORTED = Symbol('stuckReportedAt');
type Reported = StreamEntry & { [REPORTED]?: number | undefined };

/** An entry whose handler is running, and for how long (ms). */
export interface Running {
  stream: string;
  id: string;
  forMs: number;
}

/** The oldest running handler of a stream, and how many of its entries are past the threshold. */
export interface StreamHandlers {
  oldest: Running;
  stuck: number;
}

/**
 * Watches the handlers a loop is running: an entry in hand past `thresholdMs` is logged (WARN,
 * with stream, id, consumer and age; one line per batch call, naming its first ids and count)
 * and again every `thresholdMs` while it lasts. A handler
 * cannot be cancelled; what an operator needs is to see it.
 */
export class StuckWatch {
  /**
   * Part of the reader's upkeep (unsubscribing ends it): checked often enough to report within a
   * quarter of the threshold past it, at most once a second.
   */
  readonly checks$: Observable<never> = defer(() => interval(Math.max(10, Math.min(Math.floor(this.thresholdMs / 4), 1000)))).pipe(
    tap(() => this.check()),
    ignoreElements(),
  );

  constructor(
    private readonly inProgress: ReadonlySet<BatchProgress>,
    private readonly thresholdMs: number,
    private readonly consumer: string,
    private readonly logger: Logger,
  ) {}

  /** Entries whose handler is running, oldest first. */
  running(): Running[] {
    const now = performance.now();
    const out: Running[] = [];
    for (const progress of this.inProgress)
      for (let i = 0; i < progress.next; i++) {
        const at = progress.startedAt[i]!;
        const e = progress.entries[i]!;
        if (!Number.isNaN(at)) out.push({ stream: e.stream, id: e.id, forMs: Math.round(now - at) });
      }
    return out.sort((a, b) => b.forMs - a.forMs);
  }

  /** Per stream: its oldest running handler and the count past the threshold. */
  byStream(): Map<string, StreamHandlers> {
    const out = new Map<string, StreamHandlers>();
    for (const r of this.running()) {
      const seen = out.get(r.stream);
      const stuck = r.forMs >= this.thresholdMs ? 1 : 0;
      if (seen) seen.stuck += stuck;
      else out.set(r.stream, { oldest: r, stuck });
    }
    return out;
  }

  /** One WARN per handler call past the threshold (a batch call's entries share their start), at most once per threshold. */
  private check(): void {
    const now = performance.now();
    const calls = new Map<string, { at: number; entries: Reported[] }>();
    for (const progress of this.inProgress)
      for (let i = 0; i < progress.next; i++) {
        const at = progress.startedAt[i]!;
        if (Number.isNaN(at) || now - at < this.thresholdMs) continue;
        const e = progress.entries[i] as Reported;
        if (e[REPORTED] !== undefined && e[REPORTED] > at && now - e[REPORTED] < this.thresholdMs) continue;
        const key = `${at}\u0000${e.stream}`;
        const call = calls.get(key);
        if (call) call.entries.push(e);
        else calls.set(key, { at, entries: [e] });
      }
    for (const { at, entries: call } of calls.values()) {
      for (const e of call) e[REPORTED] = now;
      const { stream } = call[0]!;
      const what = call.length === 1 ? `entry ${call[0]!.id}` : `entries ${someIds(call.map((e) => e.id))}`;
      this.logger.warn(
        `${what} of "${stream}" in hand for ${Math.round(now - at)} ms (consumer "${this.consumer}", stuckEntryMs ${this.thresholdMs}): ${call.length === 1 ? 'its handler has' : `their handler (one call of ${call.length}) has`} not settled`,
      );
    }
  }
}
