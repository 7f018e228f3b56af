import { parseAdoptReply, parseRetakeReply, type RetakeResult } from '../replies/replies.js';
import { retryKeyOf } from '../../key-names.js';
import { RETAKEN_DELIVERY_COUNT } from './retry-scripts.js';
import type { ScriptedConnection } from '../connection/scripted-connection.js';

/** The commands on a group's retry sets (`<stream>:retry:<group>`, see key-names.ts), and the one place their replies are parsed. */
export class RetryCommands {
  constructor(
    private readonly conn: ScriptedConnection,
    private readonly group: string,
    private readonly onCluster: boolean,
  ) {}

  /** The retry set of this group on `stream`. */
  key(stream: string): string {
    return retryKeyOf(stream, this.group, this.onCluster);
  }

  /**
   * Records that entry `id` of `stream` is due for its next try in `delayMs` (Redis' clock), if it is
   * pending under `consumer`, or with `deliveryCount` (the failed delivery's) under another consumer
   * that was not delivered it since; with `reown` (no peer can have taken it since: its lease held it),
   * one in nobody's pending list is made pending under `consumer` again first (SCHEDULE_RETRY_SCRIPT).
   * `uncounted`: its delivery count put back. The due time in Redis ms, or -1 (not recorded).
   */
  async schedule(
    stream: string,
    id: string,
    delayMs: number,
    consumer: string,
    { uncounted = false, deliveryCount, reown = false }: { uncounted?: boolean; deliveryCount?: number; reown?: boolean } = {},
  ): Promise<number> {
    return Number(
      await this.conn.streamsScheduleRetry(
        this.key(stream),
        stream,
        delayMs,
        id,
        this.group,
        consumer,
        uncounted ? '1' : '0',
        deliveryCount === undefined ? '' : String(deliveryCount),
        reown ? '1' : '0',
      ),
    );
  }

  /**
   * Retries left with nobody on each of `streams` (RETAKE_ORPHANS_SCRIPT, one pipeline): entries whose
   * record is due `graceMs` ago or more and that are in nobody's pending list, made pending under
   * `consumer` again (delivery count RETAKEN_DELIVERY_COUNT, their records removed) for it to try now;
   * per stream at most `count` records from rank `cursor` among the due ones, and about `budgetBytes`
   * of entries. Per stream: what was found, null without the stream or the group, or the error Redis answered.
   */
  async retakeOrphans(
    streams: readonly { stream: string; cursor: number }[],
    consumer: string,
    graceMs: number,
    count: number,
    budgetBytes: number,
  ): Promise<(RetakeResult | null | Error)[]> {
    const pipeline = this.conn.pipeline() as ReturnType<ScriptedConnection['pipeline']> & Pick<ScriptedConnection, 'streamsRetakeOrphans'>;
    for (const { stream, cursor } of streams)
      void pipeline.streamsRetakeOrphans(stream, this.key(stream), this.group, consumer, cursor, graceMs, count, budgetBytes);
    const results = (await pipeline.exec()) ?? [];
    return streams.map(({ stream }, i) => {
      const [err, reply] = results[i] ?? [new Error('the retry orphans script got no reply'), null];
      return err ?? parseRetakeReply(stream, reply, RETAKEN_DELIVERY_COUNT);
    });
  }

  /** The records of entries gone from `stream` (trimmed, XDEL): nothing is left to retry. */
  async drop(stream: string, ids: readonly string[]): Promise<void> {
    if (ids.length > 0) await this.conn.zrem(this.key(stream), ...ids);
  }

  /**
   * Entries just delivered to `consumer` by self-drain or reclaim (ADOPT_RETRY_SCRIPT): per entry,
   * the ms until the retry it waits for (adopted, its count put back; at most `room` of them), -1
   * to try it now, or -2 (waiting, past `room`: left to the group for a reclaim at its due time).
   */
  async adopt(
    stream: string,
    consumer: string,
    entries: readonly { id: string; deliveryCount: number }[],
    room: number,
    minIdleMs: number,
  ): Promise<number[]> {
    const args = entries.flatMap((e) => [e.id, String(e.deliveryCount)]);
    const reply = await this.conn.streamsAdoptRetry(stream, this.key(stream), this.group, consumer, room, minIdleMs, ...args);
    return parseAdoptReply(reply, entries.length);
  }
}
