import { describeError } from '../../describe-error.js';
import { escapeControl } from '../../escape-control.js';
import { isConnectionLoss, isRefusal } from '../../redis/replies/redis-errors.js';
import { UnsupportedServerError } from '../../redact.js';
import { compareIds } from '../../redis/stream-ids.js';
import type { Logger } from '../../ports.js';
import type { StreamCommands } from '../../redis/stream-commands.js';
import { counted } from '../../readable.js';
import type { AckPipeline } from '../settle/ack-pipeline.js';
import type { Custody } from '../custody/custody.js';
import type { LoopFindings } from '../watch/loop-findings.js';
import type { ServerOffer } from './server-offer.js';
import type { StopSignal } from '../stop-signal.js';

/** What keeping a reader's groups reads and changes. */
export interface GroupKeeperDeps {
  stop: StopSignal;
  streams: readonly string[];
  group: string;
  consumer: string;
  /** Where a group created for the first time starts. */
  groupStartId: string;
  logger: Logger;
  commands: Pick<StreamCommands, 'serverFeatures' | 'ensureGroup' | 'lastGeneratedId' | 'recoverGroup' | 'groupNames' | 'probeAckDelete'>;
  custody: Pick<Custody, 'restart' | 'resume' | 'highestOf' | 'forget' | 'owed' | 'keepOwned' | 'takeUntracked' | 'explainShortAck'>;
  acks: Pick<AckPipeline, 'flush'>;
  /** What the acks and the audit found since the last check. */
  findings: LoopFindings;
  /** Where the server's features found at each (re)start are kept. */
  offer: Pick<ServerOffer, 'record' | 'unmet' | 'ackDelete' | 'deleteOnAck'>;
}

/** The park's read-ahead, dropped before a restart (see Parker.dropAhead). */
export interface AheadDropper {
  dropAhead(): Promise<unknown>;
}

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
  /** Streams whose group existed at a (re)start of this loop: one created again there was lost. */
  private readonly seen = new Set<string>();
  /**
   * Entries held (fetched, not settled) at a restart, by stream, until that stream's rejoin has
   * taken them over: the lease is cleared at the restart, so a rejoin that fails (the group lost
   * again meanwhile) must not make the next one forget them.
   */
  private readonly unjoined = new Map<string, Set<string>>();
  /** Streams whose other groups were named in a warning (deleteOnAck: 'this-group'). */
  private readonly sharedTold = new Set<string>();

  constructor(
    private readonly d: GroupKeeperDeps,
    /** Before a restart: the read-ahead out is dropped. */
    private readonly ahead: AheadDropper,
  ) {}

  /** Something for `checkGroups` (under load nothing: the beat skips its promise). */
  get due(): boolean {
    return this.d.findings.due;
  }

  /** At every (re)start: what the last run left is settled or dropped, then every stream's group exists. */
  async ensureGroups(): Promise<void> {
    const { d } = this;
    const { acks, custody } = d;
    // Self-drain must not read entries whose ack is still on its way: it would run them again.
    // A lost connection in the words of what happened, not ioredis' "max retries per request".
    await acks
      .flush()
      .catch((err: unknown) =>
        d.logger.warn(
          `ack before restart failed, its entries run again: ${isConnectionLoss(err) ? 'the connection was lost before Redis answered' : describeError(err)}`,
        ),
      );
    await this.ahead.dropAhead();
    d.findings.shortAcks.length = 0;
    for (const [stream, ids] of custody.restart()) {
      const kept = this.unjoined.get(stream);
      if (kept) for (const id of ids) kept.add(id);
      else this.unjoined.set(stream, new Set(ids));
    }
    await this.checkServer();
    // All streams at once: their commands share round trips (start-up must not grow by a round trip per stream).
    // Every one settles before a failure restarts the loop: none is still running when the next start begins.
    const results = await Promise.allSettled(d.streams.map((stream) => this.ensureGroup(stream, [...(this.unjoined.get(stream) ?? [])])));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    custody.resume();
  }

  /**
   * A failed ack restarts the pipeline (self-drain takes its entries again); short acks are
   * explained first, and a group found lost restarts it too, whose rejoin takes back what the
   * lost group owed this consumer.
   */
  async checkGroups(): Promise<void> {
    const { stop, acks, custody, findings } = this.d;
    if (findings.ackFailed && !stop.stopped) {
      findings.ackFailed = false;
      // Rethrows the failed ack: the loop restarts and self-drain takes its entries again.
      await acks.flush();
    }
    for (const [stream, entries, missing] of findings.shortAcks.splice(0)) await custody.explainShortAck(stream, entries, missing);
    if (findings.lossSeen.size === 0 || stop.stopped) return;
    throw new GroupLostError([...findings.lossSeen]);
  }

  /** The server is one this package runs on, and has what the options need; what it offers of the newer stream commands, kept (a change logged). */
  private async checkServer(): Promise<void> {
    const features = await this.d.commands.serverFeatures();
    const { major, minor, server } = features;
    if (major < MIN_SERVER.major || (major === MIN_SERVER.major && minor < MIN_SERVER.minor)) {
      throw UnsupportedServerError.because(
        `needs Redis ${MIN_SERVER.major}.${MIN_SERVER.minor} or later (Valkey 7.2 or later); the server is ${server}`,
      );
    }
    const changed = this.d.offer.record(features);
    const unmet = this.d.offer.unmet();
    if (unmet) throw UnsupportedServerError.because(unmet);
    if (changed) this.d.logger.warn(`the server changed since the last start (a failover?): ${changed}`);
  }

  private async ensureGroup(stream: string, held: readonly string[]): Promise<void> {
    const { commands, group, logger } = this.d;
    const startId = await this.groupStartId(stream);
    const created = await commands.ensureGroup(stream, startId).catch((err: unknown) => {
      // Keep Redis' own prefix (WRONGTYPE, NOPERM…) first: retry decisions read it.
      throw new Error(`${err instanceof Error ? err.message : String(err)} (XGROUP CREATE "${group}" on stream "${stream}")`, {
        cause: err,
      });
    });
    // Created again where this keeper saw it before: the server lost it (a restart without data, FLUSHALL, XGROUP DESTROY).
    if (created && this.seen.has(stream))
      logger.warn(
        `group "${group}" of stream "${stream}" was gone from the server (NOGROUP: its data lost, or the group destroyed): re-created at ${startId}`,
      );
    else if (created) logger.log(`created group "${group}" on stream "${stream}" at ${startId}`);
    this.seen.add(stream);
    await this.checkAckDelete(stream);
    await Promise.all([this.rejoin(stream, held), this.checkAlone(stream)]);
  }

  /** deleteOnAck: an ACL that denies XACKDEL refuses the start (every ack would fail, and every batch run again). */
  private async checkAckDelete(stream: string): Promise<void> {
    const { d } = this;
    const deletion = d.offer.ackDelete;
    if (!deletion) return;
    await d.commands.probeAckDelete(stream, deletion).catch((err: unknown) => {
      if (!isRefusal(err)) throw err;
      throw UnsupportedServerError.because(
        `deleteOnAck: '${d.offer.deleteOnAck}' needs XACKDEL on "${stream}", which the server refused (${describeError(err)}): grant the user +xackdel`,
      );
    });
  }

  /** deleteOnAck: 'this-group' deletes at this group's ack: another group of the stream would lose what it had not read. */
  private async checkAlone(stream: string): Promise<void> {
    const { d } = this;
    if (d.offer.ackDelete !== 'KEEPREF' || this.sharedTold.has(stream)) return;
    // A warning only: a refused XINFO does not hold the start up.
    const names = await d.commands.groupNames(stream).catch(() => []);
    const others = names.filter((g) => g !== d.group);
    if (others.length === 0) return;
    this.sharedTold.add(stream);
    d.logger.warn(
      `deleteOnAck: 'this-group' deletes each entry of "${stream}" when group "${d.group}" acks it, but the stream has other groups too (${others.map((g) => `"${escapeControl(g)}"`).join(', ')}): they lose what they had not read yet. Use deleteOnAck: 'all-groups' in every group of a shared stream`,
    );
  }

  /**
   * Where a missing group starts. The first time: `groupStartId`. After this consumer has read
   * from the stream (the group was lost: XGROUP DESTROY, a server that lost its data): the
   * highest id delivered to it, so the entries it settled do not run again (what it still
   * owes is re-delivered to it by `rejoin`). A stream that never reached that id is a new
   * stream (deleted and written anew, FLUSHALL, an empty restart): `groupStartId`.
   */
  private async groupStartId(stream: string): Promise<string> {
    const { custody, commands, groupStartId } = this.d;
    const seen = custody.highestOf(stream);
    if (seen === undefined) return groupStartId;
    const last = await commands.lastGeneratedId(stream);
    if (last !== null && compareIds(last, seen) >= 0) return seen;
    custody.forget(stream);
    return groupStartId;
  }

  /**
   * After a restart: if the group was lost meanwhile (re-created here or by a peer), take back
   * what this consumer still owed. A group re-created by a peer while this consumer was busy
   * in a handler gives no error (XACK on it answers 0): its short acks say so instead.
   */
  private async rejoin(stream: string, held: readonly string[]): Promise<void> {
    const { d } = this;
    const { custody, findings } = d;
    const highest = custody.highestOf(stream);
    if (highest === undefined) {
      findings.lossSeen.delete(stream);
      this.unjoined.delete(stream);
      return;
    }
    const owed = custody.owed(stream, held);
    // A rejoin that fails (the group gone again) keeps both the loss seen and what was held, for the next one.
    const { lost, owned } = await d.commands.recoverGroup(stream, d.consumer, highest, owed, findings.lossSeen.has(stream));
    findings.lossSeen.delete(stream);
    this.unjoined.delete(stream);
    custody.keepOwned(stream, owed, owned);
    const untracked = custody.takeUntracked(stream);
    if (!lost) return;
    d.logger.warn(
      `group "${d.group}" of stream "${stream}" had lost this consumer's pending entries (the group was re-created, or XGROUP DELCONSUMER deleted the consumer): it resumes after ${highest} and took back ${owned.length} of the ${owed.length} entries it still owed` +
        (untracked > 0
          ? `; ${counted(untracked, 'more failed entry was', 'more failed entries were')} past what it tracks and will not be retried`
          : ''),
    );
  }
}
