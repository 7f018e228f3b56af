import { concatMap, from, type Observable, repeat, Subject, timer } from 'rxjs';
import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';
import type { PauseCommands } from '../../redis/intake/pause-commands.js';
import { isRefusal, isRetryable } from '../../redis/replies/redis-errors.js';

export interface PauseWatchDeps {
  pauses: Pick<PauseCommands, 'paused'>;
  group: string;
  streams: readonly string[];
  /** How often the flags are looked at (`flowCheckMs`). */
  checkMs: number;
  logger: Logger;
  /** Says a stream paused or resumed (the consumer's PauseAnnouncer: one line per pattern). Default: a line per stream. */
  announce?: (stream: string, paused: boolean) => void;
}

/**
 * Which of a reader's streams are paused for its group (a stream paused by the CLI, the dashboard
 * or `pause()`: its flag `<stream>:paused:<group>` exists; a partitioned pattern's, each partition's). Looked at when the loop (re)starts,
 * before it reads anything (a worker that starts while paused stays paused), then every
 * `checkMs`. A paused stream is neither self-drained, reclaimed nor read; entries in hand finish,
 * and failed ones this consumer holds are still retried (they are its to finish). A stream whose
 * self-drain was skipped is drained once it resumes.
 */
export class PauseWatch {
  private paused = new Set<string>();
  private readonly changes = new Subject<void>();
  /** Streams whose self-drain was skipped while paused: drained at resume. */
  private readonly owed = new Set<string>();
  private refusalTold = false;
  private lastError = '';
  /** Emits whenever a stream of the reader is paused or resumed. */
  readonly changed$: Observable<void> = this.changes.asObservable();

  constructor(private readonly d: PauseWatchDeps) {}

  /** The looks after the first, every `checkMs`, until unsubscribed (with the reader's upkeep); a failed one is logged and tried at the next. */
  get looks$(): Observable<void> {
    return timer(this.d.checkMs).pipe(
      concatMap(() => from(this.look().catch((err: unknown) => this.failed(err)))),
      repeat(),
    );
  }

  has(stream: string): boolean {
    // Asked per entry: nothing paused (the common case) needs no lookup.
    return this.paused.size > 0 && this.paused.has(stream);
  }

  get anyPaused(): boolean {
    return this.paused.size > 0;
  }

  /** The streams not paused now: what a park or reclaim may read. The reader's own array when none is paused. */
  readable(): readonly string[] {
    return this.paused.size === 0 ? this.d.streams : this.d.streams.filter((s) => !this.paused.has(s));
  }

  /** What a (re)start self-drains: the streams not paused (no longer owed a drain); the paused ones are drained when they resume. */
  drainable(): readonly string[] {
    for (const s of this.d.streams) {
      if (this.paused.has(s)) this.owed.add(s);
      // Drained now: a later resume must not drain it again (its entries may be in hand by then).
      else this.owed.delete(s);
    }
    return this.readable();
  }

  /** Whether a resumed stream waits for its skipped self-drain. */
  get owesDrain(): boolean {
    for (const s of this.owed) if (!this.paused.has(s)) return true;
    return false;
  }

  /** The streams owed a self-drain that are running again (taken: drained now). */
  takeResumed(): string[] {
    const resumed = [...this.owed].filter((s) => !this.paused.has(s));
    for (const s of resumed) this.owed.delete(s);
    return resumed;
  }

  /**
   * One look at the flags (EXISTS per stream). A refusal (an ACL without EXISTS on the flags) is
   * logged once and reads as "not paused": no control the worker cannot read stops it. Any other
   * failure rejects (the loop's start retries it; a later look logs it).
   */
  async look(): Promise<void> {
    let flags: boolean[];
    try {
      flags = await this.d.pauses.paused(this.d.streams, this.d.group);
      this.lastError = '';
    } catch (err) {
      if (!isRefusal(err)) throw err;
      if (!this.refusalTold)
        this.d.logger.error(
          `cannot read the pause flags of group "${this.d.group}" (${describeError(err)}): this consumer cannot be paused`,
        );
      this.refusalTold = true;
      return;
    }
    const now = new Set(this.d.streams.filter((_, i) => flags[i]));
    if (now.size === this.paused.size && [...now].every((s) => this.paused.has(s))) return;
    const was = this.paused;
    // Set before the lines are logged: nothing starts once a worker has said it is paused.
    this.paused = now;
    for (const stream of this.d.streams) {
      if (was.has(stream) === now.has(stream)) continue;
      if (this.d.announce) this.d.announce(stream, now.has(stream));
      else
        this.d.logger.log(
          now.has(stream)
            ? `"${escapeControl(stream)}" paused for group "${escapeControl(this.d.group)}": what is in hand finishes, nothing new starts until it resumes`
            : `"${escapeControl(stream)}" resumed for group "${escapeControl(this.d.group)}"`,
        );
    }
    this.changes.next();
  }

  /** A lost connection is the connection report's to tell; anything else is said once per kind. */
  private failed(err: unknown): void {
    if (isRetryable(err)) return;
    const said = describeError(err);
    if (said === this.lastError) return;
    this.lastError = said;
    this.d.logger.warn(`could not look at the pause flags of group "${this.d.group}": ${said}; tried again at the next look`);
  }
}
