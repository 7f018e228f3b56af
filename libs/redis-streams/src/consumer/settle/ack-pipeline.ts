import type { StreamEntry } from '../../stream-entry.js';
import type { SettledEvent } from './settled-event.js';

/** Sends one XACK round trip for `entries`; resolves with, per stream, how many were no longer pending (and which, when Redis says). */
export type Ack = (entries: readonly StreamEntry[]) => Promise<[stream: string, missing: number, notAcked?: readonly string[]][]>;

/** What an ack tells the reader's custody: sent, confirmed, and each entry settled for good. */
export interface AckLedger {
  ackSent(entries: readonly StreamEntry[]): void;
  ackConfirmed(entries: readonly StreamEntry[]): void;
  release(entry: StreamEntry): void;
  settled(event: SettledEvent): void;
}

/** What an ack finds for the group keeper: entries no longer pending, or a failure. */
export interface AckFindings {
  /** An ack found `missing` of the entries it sent on `stream` no longer pending (see StreamCommands.ackMany). */
  shortAck(stream: string, entries: StreamEntry[], missing: number): void;
  /** An ack failed: told at once, so an idle loop does not hold its entries until a next batch. */
  ackFailedNow(): void;
}

const NOTHING_IN_FLIGHT: Promise<void> = Promise.resolve();

/**
 * Sends each batch's acks (one round trip) without making the next batch wait for Redis'
 * answer: the loop goes on reading and handling while the XACK travels. At most one ack is in
 * flight, so batches are acked and reported in order. An entry stays leased, and its `settled`
 * event waits, until its ack is confirmed; a failed ack is reported by the next `send` or
 * `flush` (its entries are still pending under this consumer, so self-drain runs them again), and
 * the findings hear of it at once, so that the next flush comes at once even when no batch follows.
 */
export class AckPipeline {
  private inFlight: Promise<void> | undefined;

  constructor(
    private readonly ack: Ack,
    private readonly ledger: AckLedger,
    private readonly findings: AckFindings,
  ) {}

  /** Waits for the previous ack (rethrowing its failure), then sends this one. */
  async send(entries: readonly StreamEntry[], events: readonly SettledEvent[]): Promise<void> {
    await this.flush();
    const { ledger } = this;
    ledger.ackSent(entries);
    let sent: ReturnType<Ack>;
    try {
      sent = this.ack(entries);
    } catch (error) {
      // The ack step is a plain function (no async frame): a throw as it is sent fails like a refusal.
      sent = Promise.reject(error);
    }
    const ack = sent.then((short) => {
      // Only those Redis named, when it did (XACKDEL): the others were acked, and deleted.
      for (const [stream, missing, notAcked] of short)
        this.findings.shortAck(
          stream,
          entries.filter((e) => e.stream === stream && (!notAcked || notAcked.includes(e.id))),
          missing,
        );
      for (let i = 0; i < entries.length; i++) {
        ledger.release(entries[i]!);
        ledger.settled(events[i]!);
      }
      ledger.ackConfirmed(entries);
    });
    // Awaited by the next send or flush; until then its failure must not count as unhandled.
    ack.catch(() => this.findings.ackFailedNow());
    this.inFlight = ack;
  }

  /** Resolves once no ack is in flight; rejects (once) with the failure of the last one. */
  flush(): Promise<void> {
    const ack = this.inFlight;
    this.inFlight = undefined;
    // Once per batch: the ack's own promise, no frame of its own.
    return ack ?? NOTHING_IN_FLIGHT;
  }
}
