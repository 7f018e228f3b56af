import type { Logger } from '../../ports.js';
import { counted } from '../../readable.js';

/** How often, per stream, the entries left to the group are logged at most (unless their number doubles). */
export const LEFT_TO_GROUP_LOG_EVERY_MS = 60_000;

/** Distinct ids remembered per stream between two lines: past it the line says "at least". */
const MAX_IDS_PER_STREAM = 100_000;

interface StreamLines {
  /** Distinct ids left since the last complete line. */
  ids: Set<string>;
  /** Times an entry was left since the last line (the same one comes back each minIdleMs). */
  times: number;
  /** When the sweep under way first left one (performance.now()); unset between sweeps. */
  sweepStart?: number;
  /** When the last complete line was logged (performance.now()), and how many entries it named. */
  at?: number;
  named: number;
  /** A "so far" line was logged in the sweep under way: its end gives the total. */
  partial: boolean;
  /** Any line was logged before. */
  logged: boolean;
}

/**
 * The warning for waiting entries left to the group past maxWaitingRetries. Redis holds no idle
 * time in the future, so an entry due later than minIdleMs comes back to a reclaim every minIdleMs
 * and is left again: the entries are noted as they are left and logged once their stream is out of
 * the reclaim sweep (or the consumer stops), so a line names the distinct entries, not one batch.
 * A sweep still under way minIdleMs after it first left one says so ("so far"), once, when there
 * was no line yet or their number doubled; its end gives the total. Then once a minute per stream,
 * or sooner when their number doubles (a second peer's wait list), never once per round.
 */
export class LeftToGroupLog {
  private readonly streams = new Map<string, StreamLines>();

  constructor(
    private readonly logger: Logger,
    private readonly maxWaitingRetries: number,
    private readonly minIdleMs: number,
  ) {}

  note(stream: string, ids: readonly string[]): void {
    let s = this.streams.get(stream);
    if (!s) this.streams.set(stream, (s = { ids: new Set(), times: 0, named: 0, partial: false, logged: false }));
    s.sweepStart ??= performance.now();
    for (const id of ids) if (s.ids.size < MAX_IDS_PER_STREAM) s.ids.add(id);
    s.times += ids.length;
  }

  /** After a reclaim round (`done`: the streams out of the sweep), or at stop (every stream): the lines due. */
  flush(done: (stream: string) => boolean = () => true): void {
    const now = performance.now();
    for (const [stream, s] of this.streams) {
      if (s.times === 0 && !s.partial) continue;
      const doubled = s.ids.size >= 2 * s.named;
      if (!done(stream)) {
        const long = s.sweepStart !== undefined && now - s.sweepStart >= this.minIdleMs;
        if (!long || s.partial || (s.logged && !doubled)) continue;
        this.line(stream, s, false);
        Object.assign(s, { times: 0, partial: true, logged: true });
        continue;
      }
      // Out of the sweep: the next one starts its own clock.
      s.sweepStart = undefined;
      const minute = s.at === undefined || now - s.at >= LEFT_TO_GROUP_LOG_EVERY_MS;
      if (!(minute || s.partial || doubled)) continue;
      this.line(stream, s, true);
      this.streams.set(stream, { ids: new Set(), times: 0, at: now, named: s.ids.size, partial: false, logged: true });
    }
  }

  private line(stream: string, s: StreamLines, complete: boolean): void {
    const n = s.ids.size >= MAX_IDS_PER_STREAM ? `at least ${MAX_IDS_PER_STREAM} entries` : counted(s.ids.size, 'entry', 'entries');
    const sofar = complete ? '' : " so far (this consumer's reclaim sweep goes on)";
    const again = s.logged ? ` (left ${s.times} times since the last such line)` : '';
    this.logger.warn(
      `${n} taken from "${stream}"${sofar} ${s.ids.size === 1 ? 'waits' : 'wait'} for a retry, past this consumer's maxWaitingRetries (${this.maxWaitingRetries}): left to the group, a reclaim takes each at its due time${again}; one due later than minIdleMs comes back each minIdleMs until then (logged once a minute, sooner if their number doubles)`,
    );
  }
}
