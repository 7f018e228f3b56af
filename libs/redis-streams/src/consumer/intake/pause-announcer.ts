import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';

/** What a stream is to the app: its pattern's name as the operator gives it (with `keyPrefix`), and its partition. */
export interface AnnouncedStream {
  name: string;
  /** Set for a partitioned pattern's stream (each of its priority levels too). */
  partition?: number;
  partitions: number;
  /** Every stream of the pattern: its partitions and their priority levels. */
  siblings: readonly string[];
}

export interface PauseAnnouncerDeps {
  group: string;
  logger: Logger;
  /** How long changes are gathered before they are said: each reader sees a flag within a look (`flowCheckMs`). */
  windowMs: number;
  streamOf: (stream: string) => AnnouncedStream;
}

const PAUSED = ': what is in hand finishes, nothing new starts until it resumes';

/**
 * The pause and resume lines of one consumer: one per pattern, not one per stream. A pattern's readers (one per
 * partition when ordered, rate-limited or fair; each partition's priority levels) see its flags at their own look;
 * what they see within one window is said in one line: the whole pattern, its partitions whose every stream changed,
 * or the streams by key. A reader that sees it later says its own line.
 */
export class PauseAnnouncer {
  /** Pattern name → stream → paused now. */
  private readonly told = new Map<string, { stream: AnnouncedStream; changes: Map<string, boolean> }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly d: PauseAnnouncerDeps) {}

  /** A reader saw `stream` paused (or resumed): said at the end of the window (at once when the window is 0). */
  tell(stream: string, paused: boolean): void {
    const s = this.d.streamOf(stream);
    const entry = this.told.get(s.name) ?? { stream: s, changes: new Map<string, boolean>() };
    this.told.set(s.name, entry);
    entry.changes.set(stream, paused);
    if (this.d.windowMs <= 0) return this.flush();
    // Not kept alive by a line to say; close() says it.
    this.timer ??= setTimeout(() => this.flush(), this.d.windowMs).unref();
  }

  /** Says what is gathered now (at close: nothing told is lost). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const group = escapeControl(this.d.group);
    for (const { stream, changes } of this.told.values()) {
      const name = escapeControl(stream.name);
      for (const paused of [true, false]) {
        const streams = new Set([...changes].filter(([, p]) => p === paused).map(([s]) => s));
        if (streams.size === 0) continue;
        const scope = this.scopeOf(stream, streams);
        this.d.logger.log(
          `"${name}" ${paused ? 'paused' : 'resumed'} for group "${group}"${scope && ` (${scope})`}${paused ? PAUSED : ''}`,
        );
      }
    }
    this.told.clear();
  }

  /** '' for the whole of an unpartitioned pattern; else its partitions whose every stream is in `streams`, and the other streams by key. */
  private scopeOf(pattern: AnnouncedStream, streams: ReadonlySet<string>): string {
    const { siblings, partitions } = pattern;
    if (streams.size === siblings.length && siblings.every((s) => streams.has(s)))
      return partitions > 1 && pattern.partition !== undefined ? `all ${partitions} partitions` : '';
    const byPartition = new Map<number, string[]>();
    if (pattern.partition !== undefined)
      for (const s of siblings) {
        const p = this.d.streamOf(s).partition!;
        byPartition.set(p, [...(byPartition.get(p) ?? []), s]);
      }
    const whole = [...byPartition].filter(([, ss]) => ss.every((s) => streams.has(s))).map(([p]) => p);
    const covered = new Set(whole.flatMap((p) => byPartition.get(p)!));
    const rest = [...streams].filter((s) => !covered.has(s)).sort();
    whole.sort((a, b) => a - b);
    return [
      whole.length > 0 ? `${whole.length === 1 ? 'partition' : 'partitions'} ${whole.join(', ')} of ${partitions}` : '',
      rest.length > 0 ? `${rest.length === 1 ? 'stream' : 'streams'} ${rest.map((s) => `"${escapeControl(s)}"`).join(', ')}` : '',
    ]
      .filter(Boolean)
      .join('; ');
  }
}
