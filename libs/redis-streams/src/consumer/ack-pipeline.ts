import type { StreamCommands } from '../redis/stream-commands.js';
import type { StreamEntry } from '../stream-entry.js';
import type { SettledEvent } from './settled-event.js';
import type { Lease } from './lease.js';

/**
 * Sends each batch's acks (one round trip) without making the next batch wait for Redis'
 * answer: the loop goes on reading and handling while the XACK travels. At most one ack is in
 * flight, so batches are acked and reported in order. An entry stays leased, and its `settled`
 * event waits, until its ack is confirmed; a failed ack is reported by the next `send` or
 * `flush` (its entries are still pending under this consumer, so self-drain runs them again), and
 * `onFailure` wakes the loop so that the next flush comes at once even when no batch follows.
 */
export class AckPipeline {
  private inFlight: Promise<void> | undefined;

  constructor(
    private readonly commands: StreamCommands,
    private readonly lease: Lease,
    private readonly onSettled: (event: SettledEvent) => void,
    /** An ack found `missing` of the entries it sent on `stream` no longer pending (see StreamCommands.ackMany). */
    private readonly onShortAck: (stream: string, entries: StreamEntry[], missing: number) => void,
    /** An ack failed: told at once, so an idle loop does not hold its entries until a next batch. */
    private readonly onFailure: () => void = () => {},
  ) {}

  /** Waits for the previous ack (rethrowing its failure), then sends this one. */
  async send(entries: readonly StreamEntry[], events: readonly SettledEvent[]): Promise<void> {
    await this.flush();
    this.lease.ackSent(entries);
    const ack = this.commands.ackMany(entries).then((short) => {
      for (const [stream, missing] of short)
        this.onShortAck(
          stream,
          entries.filter((e) => e.stream === stream),
          missing,
        );
      for (let i = 0; i < entries.length; i++) {
        this.lease.drop(entries[i]!);
        this.onSettled(events[i]!);
      }
      this.lease.ackConfirmed(entries);
    });
    // Awaited by the next send or flush; until then its failure must not count as unhandled.
    ack.catch(() => this.onFailure());
    this.inFlight = ack;
  }

  /** Resolves once no ack is in flight; rejects (once) with the failure of the last one. */
  async flush(): Promise<void> {
    const ack = this.inFlight;
    this.inFlight = undefined;
    await ack;
  }
}
