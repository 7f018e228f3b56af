import type { LoggerService } from '@nestjs/common';
import { interval, exhaustMap, type Subscription } from 'rxjs';
import type { StreamCommands } from '../redis/stream-commands.js';
import { groupIds, type StreamEntry } from '../redis/stream-entry.js';

/** The ids of held entries, each once: a group re-created under a read-ahead can deliver an id twice, as two objects. */
const distinctIds = (held: ReadonlySet<StreamEntry>): string[] => [...new Set(Array.from(held, (e) => e.id))];

/**
 * The entries this consumer holds (fetched, not yet settled). Every `renewMs` their idle
 * time is reset on the server, so a peer's XAUTOCLAIM never takes an entry that is still
 * in hand or waiting its turn in the batch, however long its handler runs.
 */
export class Lease {
  /** By stream, the entries themselves: an object's identity hashes for free, a fresh id string would be hashed on every hold and drop. */
  private readonly held = new Map<string, Set<StreamEntry>>();
  private timer: Subscription | undefined;

  constructor(
    private readonly commands: StreamCommands,
    private readonly consumer: string,
    private readonly renewMs: number,
    private readonly logger: LoggerService,
  ) {}

  start(): void {
    // exhaustMap: a slow renewal is never stacked behind another.
    this.timer ??= interval(this.renewMs).pipe(exhaustMap(() => this.renew())).subscribe();
  }

  stop(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.held.clear();
  }

  /** Ids held on `stream` (a lookup set, made on each call). */
  idsOn(stream: string): Set<string> {
    return new Set(Array.from(this.held.get(stream) ?? [], (e) => e.id));
  }

  hold(entries: readonly StreamEntry[]): void {
    let stream: string | undefined;
    let set: Set<StreamEntry> | undefined;
    for (const e of entries) {
      // Entries of one stream come in runs: one map lookup per run.
      if (e.stream !== stream) {
        stream = e.stream;
        set = this.held.get(stream);
        if (!set) this.held.set(stream, (set = new Set()));
      }
      set!.add(e);
    }
  }

  /** Ids held, by stream, but for `except` (at abandon: those whose handler was called). */
  heldIds(except: readonly StreamEntry[] = []): Map<string, string[]> {
    const skip = groupIds(except);
    const out = new Map<string, string[]>();
    for (const [stream, held] of this.held) {
      const skipped = new Set(skip.get(stream));
      const rest = distinctIds(held).filter((id) => !skipped.has(id));
      if (rest.length > 0) out.set(stream, rest);
    }
    return out;
  }

  entries(): { stream: string; id: string }[] {
    return [...this.held].flatMap(([stream, held]) => distinctIds(held).map((id) => ({ stream, id })));
  }

  /** How many entries are held, per stream (distinct ids). */
  counts(): Map<string, number> {
    return new Map([...this.held].map(([stream, held]) => [stream, distinctIds(held).length]));
  }

  drop(entry: StreamEntry): void {
    this.held.get(entry.stream)?.delete(entry);
  }

  /** Entries held but not started when the loop stops: make them idle at once so the next peer's beat takes them. */
  async handBack(entries: readonly StreamEntry[], idleMs: number): Promise<void> {
    for (const e of entries) this.drop(e);
    await this.handBackIds(groupIds(entries), idleMs);
  }

  async handBackIds(byStream: Map<string, string[]>, idleMs: number): Promise<void> {
    for (const [stream, ids] of byStream) {
      await this.commands.setIdle(stream, this.consumer, ids, idleMs).catch((err: unknown) => {
        // Still pending under our name: self-drain or a later reclaim recovers them.
        this.logger.warn(`could not hand back ${ids.length} entries of "${stream}": ${String(err)}`);
      });
    }
  }

  private async renew(): Promise<void> {
    for (const [stream, set] of this.held) {
      if (set.size === 0) continue;
      const entries = [...set];
      try {
        const owned = new Set(await this.commands.setIdle(stream, this.consumer, entries.map((e) => e.id), 0));
        // Not ours on the server, and still held after the answer (not settled meanwhile).
        const lost = entries.filter((e) => !owned.has(e.id) && set.has(e)).map((e) => e.id);
        if (lost.length > 0) {
          this.logger.warn(`lease lost on ${lost.length} entries of "${stream}" (${lost.slice(0, 5).join(', ')}): a peer reclaimed them`);
        }
      } catch (err) {
        this.logger.warn(`lease renewal on "${stream}" failed: ${String(err)}`);
      }
    }
  }
}
