import { interval, type Subscription } from 'rxjs';
import { someIds } from '../id-list.js';
import type { Logger } from '../ports.js';
import type { StreamEntry } from '../redis/stream-entry.js';
import type { BatchProgress } from './batch-settler.js';

/** A slot on the entry, as the lease's mark: a per-entry store, not a map (the hot path). */
const STARTED = Symbol('handlerStartedAt');
type Clocked = StreamEntry & { [STARTED]?: number | undefined; [REPORTED]?: number | undefined };
const REPORTED = Symbol('stuckReportedAt');

/** Their handler was called (performance.now()). A rejection leaves the mark: the batch, and so the watch's view of it, ends then. */
export function handlerStarted(entries: StreamEntry | readonly StreamEntry[]): void {
  const at = performance.now();
  if (!Array.isArray(entries)) (entries as Clocked)[STARTED] = at;
  else for (const e of entries as readonly StreamEntry[]) (e as Clocked)[STARTED] = at;
}

/** Their handler settled. */
export function handlerEnded(entries: StreamEntry | readonly StreamEntry[]): void {
  if (!Array.isArray(entries)) (entries as Clocked)[STARTED] = undefined;
  else for (const e of entries as readonly StreamEntry[]) (e as Clocked)[STARTED] = undefined;
}

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
  private timer: Subscription | undefined;

  constructor(
    private readonly inProgress: ReadonlySet<BatchProgress>,
    private readonly thresholdMs: number,
    private readonly consumer: string,
    private readonly logger: Logger,
  ) {}

  start(): void {
    // Checked often enough to report within a quarter of the threshold past it, at most once a second.
    this.timer ??= interval(Math.max(10, Math.min(Math.floor(this.thresholdMs / 4), 1000))).subscribe(() => this.check());
  }

  stop(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
  }

  /** Entries whose handler is running, oldest first. */
  running(): Running[] {
    const now = performance.now();
    const out: Running[] = [];
    for (const progress of this.inProgress)
      for (let i = 0; i < progress.next; i++) {
        const e = progress.entries[i] as Clocked;
        const at = e[STARTED];
        if (at !== undefined) out.push({ stream: e.stream, id: e.id, forMs: Math.round(now - at) });
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
    const calls = new Map<string, Clocked[]>();
    for (const progress of this.inProgress)
      for (let i = 0; i < progress.next; i++) {
        const e = progress.entries[i] as Clocked;
        const at = e[STARTED];
        if (at === undefined || now - at < this.thresholdMs) continue;
        if (e[REPORTED] !== undefined && e[REPORTED] > at && now - e[REPORTED] < this.thresholdMs) continue;
        const key = `${at}\u0000${e.stream}`;
        const call = calls.get(key);
        if (call) call.push(e);
        else calls.set(key, [e]);
      }
    for (const call of calls.values()) {
      for (const e of call) e[REPORTED] = now;
      const { stream, [STARTED]: at } = call[0]!;
      const what = call.length === 1 ? `entry ${call[0]!.id}` : `entries ${someIds(call.map((e) => e.id))}`;
      this.logger.warn(
        `${what} of "${stream}" in hand for ${Math.round(now - at!)} ms (consumer "${this.consumer}", stuckEntryMs ${this.thresholdMs}): ${call.length === 1 ? 'its handler has' : `their handler (one call of ${call.length}) has`} not settled`,
      );
    }
  }
}
