import { closeSync, openSync, readSync } from 'node:fs';
import { compareIds } from './order-checker.js';

/**
 * Counting outside the processes (REVIEW.md "How to count") for a producer and workers that each append one line per
 * event to a file: the producer `A|N|X <n> <stream> <id or error>` (acknowledged, NotDurableError, other failure), the
 * workers `S|E|F <pid> <stream> <id> <key> <n>` (start, ended well, failed). Records are numbered (`n`, in the
 * payload), so an entry is found again by its number wherever it is: in a stream (whatever id a failover gave it), a
 * schedule or a dead-letter stream.
 */

/** An append-only file read as it grows: each call parses only the lines appended since the last (never the whole file again). */
export class AppendedLines {
  private offset = 0;
  private rest = '';

  constructor(
    private readonly path: string,
    private readonly onLine: (line: string) => void,
  ) {}

  /** Reads what was appended since the last call. */
  poll(): void {
    const fd = openSync(this.path, 'r');
    try {
      const buf = Buffer.alloc(1 << 16);
      for (;;) {
        const read = readSync(fd, buf, 0, buf.length, this.offset);
        if (read === 0) break;
        this.offset += read;
        const text = this.rest + buf.toString('utf8', 0, read);
        const lines = text.split('\n');
        this.rest = lines.pop()!;
        for (const line of lines) if (line) this.onLine(line);
      }
    } finally {
      closeSync(fd);
    }
  }
}

/** What the producer's emits came to. */
export class ProducedLog {
  /** n → stream and id of each acknowledged emit. */
  readonly acknowledged = new Map<number, { stream: string; id: string }>();
  /** n of each emit that failed with NotDurableError (written on the master, not confirmed). */
  readonly notDurable = new Map<number, { stream: string; id: string }>();
  /** n → message of each emit that failed otherwise. */
  readonly failed = new Map<number, string>();
  private readonly lines: AppendedLines;

  constructor(path: string) {
    this.lines = new AppendedLines(path, (line) => {
      const [kind, n, stream, ...rest] = line.split(' ');
      if (kind === 'A') this.acknowledged.set(Number(n), { stream: stream!, id: rest[0]! });
      else if (kind === 'N') this.notDurable.set(Number(n), { stream: stream!, id: rest[0]! });
      else if (kind === 'X') this.failed.set(Number(n), `${stream} ${rest.join(' ')}`);
      else throw new Error(`produced log: unexpected line ${line}`);
    });
  }

  /** Emits that came to an answer so far (after reading what was appended). */
  answered(): number {
    this.lines.poll();
    return this.acknowledged.size + this.notDurable.size + this.failed.size;
  }
}

/**
 * The workers' handlings (and `K <pid>`, appended by the test once it killed a worker: its open handlings end there),
 * checked as they are read for what an ordered stream promises per key: no handling starts
 * while another of its key runs (an overlap), and no entry starts again after a later entry of its key started (a
 * re-run after a later one: its ack was lost, or the group set back).
 */
export class HandledLog {
  /** n of every record handled well (`E`), with how many times. */
  readonly handled = new Map<number, number>();
  /** Handlings started (`S`). */
  starts = 0;
  /** Entries (`stream id`) of ordered streams started again after a later entry of their key started. */
  readonly rerunsAfterLater = new Set<string>();
  /** Starts of an ordered stream's key while another handling of that key was open. */
  readonly overlaps: string[] = [];
  private readonly open = new Map<string, { pid: string; id: string }>();
  private readonly newest = new Map<string, string>();
  private readonly lines: AppendedLines;

  /** `ordered(stream)`: whether the stream's keys are ordered (their handlings are checked). */
  constructor(path: string, ordered: (stream: string) => boolean) {
    this.lines = new AppendedLines(path, (line) => {
      const [kind, pid, stream, id, key, n] = line.split(' ') as [string, string, string, string, string, string];
      if (kind === 'K') {
        // The test killed `pid`: its open handlings end here.
        for (const [lane, running] of this.open) if (running.pid === pid) this.open.delete(lane);
        return;
      }
      if (kind === 'E') this.handled.set(Number(n), (this.handled.get(Number(n)) ?? 0) + 1);
      if (kind === 'S') this.starts++;
      if (!ordered(stream)) return;
      const lane = `${stream} ${key}`;
      if (kind === 'S') {
        const running = this.open.get(lane);
        if (running) this.overlaps.push(`${lane}: ${id} (pid ${pid}) started while ${running.id} (pid ${running.pid}) ran`);
        const newest = this.newest.get(lane);
        if (newest !== undefined && compareIds(id, newest) < 0) this.rerunsAfterLater.add(`${stream} ${id}`);
        if (newest === undefined || compareIds(id, newest) > 0) this.newest.set(lane, id);
        this.open.set(lane, { pid, id });
      } else if (this.open.get(lane)?.id === id) this.open.delete(lane);
    });
  }

  /** Reads what was appended since the last call. */
  poll(): this {
    this.lines.poll();
    return this;
  }
}
