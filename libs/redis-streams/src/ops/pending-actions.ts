import { encodeDeadLetterHead } from '../codec/dead-letter-codec.js';
import { describeError } from '../describe-error.js';
import { escapeControl as e } from '../escape-control.js';
import { deadLetterKeyOf } from '../key-names.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import type { PendingRow } from '../redis/replies/replies.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import { StreamCommands } from '../redis/stream-commands.js';

/**
 * An operator's move of one pending entry refused, nothing done: `owner-connected` (its owner may
 * still be handling it: `force` does it anyway), `not-pending`, `changed-hands`, `gone` (no longer in
 * the stream: its letter would carry no fields; `force` writes it anyway), `no-retry` (retry-now of
 * an entry that waits for none).
 */
export class PendingActionRefused extends Error {
  constructor(
    readonly reason: 'owner-connected' | 'owner-unknown' | 'not-pending' | 'changed-hands' | 'gone' | 'no-retry',
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Where one pending entry is: its stream, group and id. */
export interface PendingTarget {
  stream: string;
  group: string;
  id: string;
}

type Row = PendingRow & { idleMs: number };

/**
 * The operator's moves of one pending entry (the CLI's `pending` and the dashboard's buttons). Each
 * refuses while the entry's owner has a connection open, since it may still be handling it: released,
 * a peer would handle it a second time; dead-lettered, it would be both handled and dead-lettered.
 * `force` does it anyway. Each acts only while the owner it read still holds the entry.
 */
export class PendingActions {
  private readonly reports: ReportCommands;

  constructor(private readonly redis: RedisConnection) {
    this.reports = new ReportCommands(redis);
  }

  /** The entry's pending row (owner, idle, deliveries); refused when it is not pending. */
  async row(t: PendingTarget): Promise<Row> {
    const row = await this.reports.pendingEntry(t.stream, t.group, t.id);
    if (!row) throw new PendingActionRefused('not-pending', `${t.id} is not pending in group "${e(t.group)}" of "${e(t.stream)}"`);
    return row;
  }

  /** Its idle time set to `minIdleMs`, owner and delivery count unchanged: the next peer that beats reclaims it. */
  async release(t: PendingTarget, minIdleMs: number, force: boolean): Promise<Row> {
    const row = await this.checked(t, force);
    await this.requireInStream(t);
    await this.setIdle(t, row, minIdleMs);
    return row;
  }

  /**
   * A waiting retry made due now (its record's due time set to Redis' clock) and released, so the
   * next peer that beats takes it and tries it at once. A live owner holds its waiting retries in
   * process until their own time: refused while it is connected (`force` lets a peer race it).
   */
  async retryNow(t: PendingTarget, minIdleMs: number, force: boolean): Promise<Row> {
    const row = await this.checked(t, force);
    await this.requireInStream(t);
    const { dueAt } = await this.reports.retryRecords(t.stream, t.group, [t.id]);
    if (dueAt.get(t.id) === null || dueAt.get(t.id) === undefined)
      throw new PendingActionRefused('no-retry', `${t.id} waits for no retry (no record in the group's retry set): release it instead`);
    const due = await this.commands(t).retries.schedule(t.stream, t.id, 0, row.consumer);
    if (due < 0) throw this.changedHands(t, row);
    await this.setIdle(t, row, minIdleMs);
    return row;
  }

  /**
   * Moved to the dead-letter stream (`to`, else `<stream>:dead`, `{<stream>}:dead` on a cluster) and
   * acked, in the library's one script, only while its owner still holds it. Its letter's reason names `by`.
   */
  async deadLetter(
    t: PendingTarget,
    options: { force: boolean; forceGone: boolean; to?: string; by: string },
  ): Promise<{ row: Row; deadLetterStream: string; deadLetterId: string }> {
    const row = await this.checked(t, options.force);
    const fields = await this.reports.entryFields(t.stream, t.id);
    if (fields === null && !options.forceGone)
      throw new PendingActionRefused(
        'gone',
        `${t.id} is no longer in the stream (trimmed or deleted): its dead letter would carry no fields; add --force to write it anyway`,
      );
    const dead = options.to ?? deadLetterKeyOf(t.stream, this.onCluster);
    const head = encodeDeadLetterHead({
      stream: t.stream,
      sourceId: t.id,
      group: t.group,
      consumer: row.consumer,
      deliveryCount: row.deliveryCount,
      error: `dead-lettered by hand (${options.by})`,
      deadAt: Date.now(),
    });
    const id = await this.commands(t).deadLetter(t.stream, dead, row.consumer, t.id, head, true);
    if (id === null) throw this.changedHands(t, row);
    return { row, deadLetterStream: dead, deadLetterId: id };
  }

  private get onCluster(): boolean {
    return (this.redis as { isCluster?: boolean }).isCluster === true;
  }

  /** The group's commands; on a cluster its retry sets are named in the stream's slot, as the scripts that name both need. */
  private commands(t: PendingTarget): StreamCommands {
    return new StreamCommands(this.redis, t.group, this.onCluster);
  }

  private async checked(t: PendingTarget, force: boolean): Promise<Row> {
    const row = await this.row(t);
    if (!force) await this.requireOwnerGone(t, row.consumer);
    return row;
  }

  /** An entry gone from its stream (trimmed, XDEL) would be dropped from the PEL by the XCLAIM of a release, unhandled and unsaid. */
  private async requireInStream(t: PendingTarget): Promise<void> {
    if ((await this.reports.entryFields(t.stream, t.id)) === null)
      throw new PendingActionRefused(
        'gone',
        `${t.id} is no longer in the stream (trimmed or deleted): handed to a peer, Redis would drop it from the pending list unhandled; dead-letter it instead (its letter carries no fields)`,
      );
  }

  private async setIdle(t: PendingTarget, row: Row, idleMs: number): Promise<void> {
    const [done] = await this.commands(t).setIdle(t.stream, row.consumer, [t.id], idleMs);
    if (!done) throw this.changedHands(t, row);
  }

  private changedHands(t: PendingTarget, row: Row): PendingActionRefused {
    return new PendingActionRefused(
      'changed-hands',
      `${t.id} changed hands meanwhile (no longer pending under "${e(row.consumer)}"): nothing done`,
    );
  }

  /** Refuses to move an entry its owner may still be handling: a connection of it is open (connected-consumers.ts). */
  private async requireOwnerGone(t: PendingTarget, owner: string): Promise<void> {
    const connected = await this.reports.connectedConsumers(t.group).catch((err: unknown) => {
      throw new PendingActionRefused(
        'owner-unknown',
        `cannot tell whether "${e(owner)}" still handles ${t.id} (CLIENT LIST failed: ${describeError(err)}); add --force to go on`,
        { cause: err },
      );
    });
    if (connected.has(owner))
      throw new PendingActionRefused(
        'owner-connected',
        `"${e(owner)}" has a connection open: it may still be handling ${t.id}; stop that worker first, or add --force (a peer may then handle it a second time)`,
      );
  }
}
