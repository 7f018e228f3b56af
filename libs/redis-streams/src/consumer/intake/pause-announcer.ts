import { escapeControl } from '../../escape-control.js';
import type { Logger } from '../../ports.js';

/** What a stream is to the app: the pattern's name as the operator gives it (with `keyPrefix`), and its partition. */
export interface AnnouncedStream {
  name: string;
  /** Set for a partitioned pattern's stream. */
  partition?: number;
  partitions: number;
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
 * The pause and resume lines of one consumer: one per pattern, not one per stream. A partitioned pattern's readers
 * (one per partition when ordered, rate-limited or fair) each see its flags at their own look; what they see within
 * one window is said in one line naming the partitions. A reader that sees it later says its own line.
 */
export class PauseAnnouncer {
  /** Pattern name → partition (-1: not partitioned) → paused now. */
  private readonly told = new Map<string, { stream: AnnouncedStream; changes: Map<number, boolean> }>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly d: PauseAnnouncerDeps) {}

  /** A reader saw `stream` paused (or resumed): said at the end of the window (at once when the window is 0). */
  tell(stream: string, paused: boolean): void {
    const s = this.d.streamOf(stream);
    const entry = this.told.get(s.name) ?? { stream: s, changes: new Map<number, boolean>() };
    this.told.set(s.name, entry);
    entry.changes.set(s.partition ?? -1, paused);
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
        const parts = [...changes].filter(([, p]) => p === paused).map(([i]) => i);
        if (parts.length === 0) continue;
        const scope = stream.partition === undefined || stream.partitions <= 1 ? '' : ` (${partitionsOf(parts, stream.partitions)})`;
        this.d.logger.log(`"${name}" ${paused ? 'paused' : 'resumed'} for group "${group}"${scope}${paused ? PAUSED : ''}`);
      }
    }
    this.told.clear();
  }
}

function partitionsOf(parts: number[], of: number): string {
  if (parts.length === of) return `all ${of} partitions`;
  parts.sort((a, b) => a - b);
  return `${parts.length === 1 ? 'partition' : 'partitions'} ${parts.join(', ')} of ${of}`;
}
