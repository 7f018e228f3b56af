import { describeError } from '../describe-error.js';
import { UnsupportedServerError } from '../redis/redis-errors.js';
import { compareIds } from '../redis/stream-ids.js';
import type { StreamEntry } from '../stream-entry.js';
import type { LoopParts } from './loop-parts.js';
import { counted } from '../readable.js';

/** The oldest server this package is tested on (CI runs Redis 7.0): XAUTOCLAIM's 3-element reply, XINFO's lag. */
const MIN_SERVER = { major: 7, minor: 0 };

/** The group no longer lists this consumer although it has read from it, or is gone: it was lost and re-created. */
export class GroupLostError extends Error {
  constructor(streams: string[]) {
    super(
      `the group of ${streams.map((s) => `"${s}"`).join(', ')} no longer lists this consumer, or is gone (lost and re-created?): rejoining`,
    );
    this.name = 'GroupLostError';
  }
}

/**
 * A loop's consumer groups: created at every (re)start, and rejoined when lost (re-created
 * here or by a peer), taking back what the lost group owed this consumer. Between beats it
 * looks into what the acks and the audit found (a failed ack, short acks, a loss).
 */
export class GroupKeeper {
  /** Short acks not yet explained (see PendingAudit.shortAck): the next beat looks into them. */
  private readonly shortAcks: [stream: string, entries: StreamEntry[], missing: number][] = [];
  /** Streams whose group was found lost without an error to say so (see PendingAudit). */
  private readonly lossSeen = new Set<string>();
  /** Streams whose group existed at a (re)start of this loop: one created again there was lost. */
  private readonly seen = new Set<string>();
  /** An ack failed since the last flush: the next beat surfaces it. */
  private ackFailed = false;
  /**
   * Entries held (fetched, not settled) at a restart, by stream, until that stream's rejoin has
   * taken them over: the lease is cleared at the restart, so a rejoin that fails (the group lost
   * again meanwhile) must not make the next one forget them.
   */
  private readonly unjoined = new Map<string, Set<string>>();

  constructor(
    private readonly p: LoopParts,
    /** Before a restart: the read-ahead out is dropped (see Parker.dropAhead). */
    private readonly dropAhead: () => Promise<void>,
  ) {}

  groupLost(stream: string): void {
    this.lossSeen.add(stream);
  }

  shortAck(stream: string, entries: StreamEntry[], missing: number): void {
    this.shortAcks.push([stream, entries, missing]);
  }

  ackFailedNow(): void {
    this.ackFailed = true;
  }

  /** Something for `checkGroups` (under load nothing: the beat skips its promise). */
  get due(): boolean {
    return this.ackFailed || this.lossSeen.size > 0 || this.shortAcks.length > 0;
  }

  /** At every (re)start: what the last run left is settled or dropped, then every stream's group exists. */
  async ensureGroups(): Promise<void> {
    const { acks, audit, lease, d } = this.p;
    // Self-drain must not read entries whose ack is still on its way: it would run them again.
    await acks.flush().catch((err: unknown) => d.logger.warn(`ack before restart failed, its entries run again: ${describeError(err)}`));
    await this.dropAhead();
    audit.stop();
    this.shortAcks.length = 0;
    for (const [stream, ids] of lease.heldIds()) {
      const kept = this.unjoined.get(stream);
      if (kept) for (const id of ids) kept.add(id);
      else this.unjoined.set(stream, new Set(ids));
    }
    lease.stop();
    await this.checkServer();
    // All streams at once: their commands share round trips (start-up must not grow by a round trip per stream).
    // Every one settles before a failure restarts the loop: none is still running when the next start begins.
    const results = await Promise.allSettled(d.streams.map((stream) => this.ensureGroup(stream, [...(this.unjoined.get(stream) ?? [])])));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    lease.start();
    audit.start();
  }

  /**
   * A failed ack restarts the pipeline (self-drain takes its entries again); short acks are
   * explained first, and a group found lost restarts it too, whose rejoin takes back what the
   * lost group owed this consumer.
   */
  async checkGroups(): Promise<void> {
    const { stop, acks, audit } = this.p;
    if (this.ackFailed && !stop.stopped) {
      this.ackFailed = false;
      // Rethrows the failed ack: the loop restarts and self-drain takes its entries again.
      await acks.flush();
    }
    for (const [stream, entries, missing] of this.shortAcks.splice(0)) await audit.shortAck(stream, entries, missing);
    if (this.lossSeen.size === 0 || stop.stopped) return;
    throw new GroupLostError([...this.lossSeen]);
  }

  private async checkServer(): Promise<void> {
    const { major, minor, server } = await this.p.d.commands.serverVersion();
    if (major < MIN_SERVER.major || (major === MIN_SERVER.major && minor < MIN_SERVER.minor)) {
      throw new UnsupportedServerError(
        `needs Redis ${MIN_SERVER.major}.${MIN_SERVER.minor} or later (Valkey 7.2 or later); the server is ${server}`,
      );
    }
  }

  private async ensureGroup(stream: string, held: readonly string[]): Promise<void> {
    const { commands, options, logger } = this.p.d;
    const startId = await this.groupStartId(stream);
    const created = await commands.ensureGroup(stream, startId).catch((err: unknown) => {
      // Keep Redis' own prefix (WRONGTYPE, NOPERM…) first: retry decisions read it.
      throw new Error(`${err instanceof Error ? err.message : String(err)} (XGROUP CREATE "${options.group}" on stream "${stream}")`, {
        cause: err,
      });
    });
    // Created again where this keeper saw it before: the server lost it (a restart without data, FLUSHALL, XGROUP DESTROY).
    if (created && this.seen.has(stream))
      logger.warn(
        `group "${options.group}" of stream "${stream}" was gone from the server (NOGROUP: its data lost, or the group destroyed): re-created at ${startId}`,
      );
    else if (created) logger.log(`created group "${options.group}" on stream "${stream}" at ${startId}`);
    this.seen.add(stream);
    await this.rejoin(stream, held);
  }

  /**
   * Where a missing group starts. The first time: `groupStartId`. After this consumer has read
   * from the stream (the group was lost: XGROUP DESTROY, a server that lost its data): the
   * highest id delivered to it, so the entries it settled do not run again (what it still
   * owes is re-delivered to it by `rejoin`). A stream that never reached that id is a new
   * stream (deleted and written anew, FLUSHALL, an empty restart): `groupStartId`.
   */
  private async groupStartId(stream: string): Promise<string> {
    const { marks, d } = this.p;
    const seen = marks.highestOf(stream);
    if (seen === undefined) return d.options.groupStartId;
    const last = await d.commands.lastGeneratedId(stream);
    if (last !== null && compareIds(last, seen) >= 0) return seen;
    marks.forget(stream);
    return d.options.groupStartId;
  }

  /**
   * After a restart: if the group was lost meanwhile (re-created here or by a peer), take back
   * what this consumer still owed. A group re-created by a peer while this consumer was busy
   * in a handler gives no error (XACK on it answers 0): its short acks say so instead.
   */
  private async rejoin(stream: string, held: readonly string[]): Promise<void> {
    const { marks, d } = this.p;
    const highest = marks.highestOf(stream);
    if (highest === undefined) {
      this.lossSeen.delete(stream);
      this.unjoined.delete(stream);
      return;
    }
    const owed = marks.owed(stream, held);
    // A rejoin that fails (the group gone again) keeps both the loss seen and what was held, for the next one.
    const { lost, owned } = await d.commands.recoverGroup(stream, d.options.consumer, highest, owed, this.lossSeen.has(stream));
    this.lossSeen.delete(stream);
    this.unjoined.delete(stream);
    marks.keepOwned(stream, owed, owned);
    const untracked = marks.takeUntracked(stream);
    if (!lost) return;
    d.logger.warn(
      `group "${d.options.group}" of stream "${stream}" had lost this consumer's pending entries (the group was re-created, or XGROUP DELCONSUMER deleted the consumer): it resumes after ${highest} and took back ${owned.length} of the ${owed.length} entries it still owed` +
        (untracked > 0
          ? `; ${counted(untracked, 'more failed entry was', 'more failed entries were')} past what it tracks and will not be retried`
          : ''),
    );
  }
}
