import type { LoggerService } from '@nestjs/common';
import { interval, exhaustMap, type Subscription } from 'rxjs';
import type { StreamCommands } from '../redis/stream-commands.js';
import { groupIds, type StreamEntry } from '../redis/stream-entry.js';

/**
 * The entries this consumer holds (fetched, not yet settled). Every `renewMs` their idle
 * time is reset on the server, so a peer's XAUTOCLAIM never takes an entry that is still
 * in hand or waiting its turn in the batch, however long its handler runs.
 */
export class Lease {
  private readonly held = new Map<string, Set<string>>();
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

  holds(entry: StreamEntry): boolean {
    return this.held.get(entry.stream)?.has(entry.id) ?? false;
  }

  hold(entries: readonly StreamEntry[]): void {
    for (const e of entries) {
      let ids = this.held.get(e.stream);
      if (!ids) this.held.set(e.stream, (ids = new Set()));
      ids.add(e.id);
    }
  }

  /** Ids held, by stream, but for `except` (at abandon: those whose handler was called). */
  heldIds(except: readonly StreamEntry[] = []): Map<string, string[]> {
    const skip = groupIds(except);
    const out = new Map<string, string[]>();
    for (const [stream, ids] of this.held) {
      const skipped = new Set(skip.get(stream));
      const rest = [...ids].filter((id) => !skipped.has(id));
      if (rest.length > 0) out.set(stream, rest);
    }
    return out;
  }

  entries(): { stream: string; id: string }[] {
    return [...this.held].flatMap(([stream, ids]) => [...ids].map((id) => ({ stream, id })));
  }

  /** How many entries are held, per stream. */
  counts(): Map<string, number> {
    return new Map([...this.held].map(([stream, ids]) => [stream, ids.size]));
  }

  drop(entry: StreamEntry): void {
    this.held.get(entry.stream)?.delete(entry.id);
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
      const ids = [...set];
      try {
        const owned = new Set(await this.commands.setIdle(stream, this.consumer, ids, 0));
        const lost = ids.filter((id) => !owned.has(id) && set.has(id));
        if (lost.length > 0) {
          this.logger.warn(`lease lost on ${lost.length} entries of "${stream}" (${lost.slice(0, 5).join(', ')}): a peer reclaimed them`);
        }
      } catch (err) {
        this.logger.warn(`lease renewal on "${stream}" failed: ${String(err)}`);
      }
    }
  }
}
