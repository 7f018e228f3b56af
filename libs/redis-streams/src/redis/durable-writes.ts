import type { Cluster } from 'ioredis';
import type { ResolvedDurability } from '../options/durability-options.js';
import { slotOf } from '../slots.js';
import type { RedisConnection } from './connect.js';
import { parseWaitReply } from './replies.js';
import { waitCommand, type Confirmation, type RawCommand } from './replication-wait.js';

/** Each write's replies (`[error, reply]` per command, as a pipeline answers) and what the wait after them confirmed. */
export interface DurableResult {
  replies: [Error | null, unknown][];
  confirmed: Confirmation;
}

interface Pending {
  commands: readonly RawCommand[];
  resolve: (result: DurableResult) => void;
  reject: (err: unknown) => void;
  /** Pipelines it was sent in and redirected (MOVED/ASK): not written, sent again after a slot refresh. */
  redirects: number;
}

interface Batch {
  /** A key of the batch's slot: the pipeline goes to that slot's master. */
  slotKey: string;
  durability: ResolvedDurability;
  writes: Pending[];
  commands: number;
}

/** Commands of one pipeline before it is sent without waiting for the tick's end. */
const MAX_BATCH_COMMANDS = 1000;
/** A write redirected this often (a slot moving again and again) fails with the redirection. */
const MAX_REDIRECTS = 3;

const isRedirect = (err: Error | null): boolean => err !== null && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(err.message);

/**
 * Durable writes on their own connection (a second one, so that a wait never holds the shared
 * command connection): the writes of one tick, per hash slot and durability, go in one pipeline
 * followed by one WAIT (or WAITAOF), which covers them all: concurrent emits pay one wait per slot,
 * not one per entry. On a cluster the pipeline goes to the slot's master; a write redirected there
 * (MOVED during a failover) was not written: ioredis does not re-send a pipeline whose wait succeeded,
 * so it is sent again here, in a later pipeline with its own wait, never confirmed by a wait that ran
 * on another node. Every command is sent raw (scripts as EVAL): a NOSCRIPT re-send would run after the wait.
 */
export class DurableWrites {
  private readonly open = new Map<string, Batch>();
  private flushScheduled = false;

  constructor(
    private readonly conn: RedisConnection,
    private readonly onCluster: boolean,
  ) {}

  /** Sends `commands` (one write's, every key in `slotKey`'s slot) with this tick's writes of that slot, then the wait. */
  write(slotKey: string, durability: ResolvedDurability, commands: readonly RawCommand[]): Promise<DurableResult> {
    return new Promise<DurableResult>((resolve, reject) => this.enqueue(slotKey, durability, { commands, resolve, reject, redirects: 0 }));
  }

  private enqueue(slotKey: string, durability: ResolvedDurability, write: Pending): void {
    const key = `${this.onCluster ? slotOf(slotKey) : 0} ${durability.replicas} ${durability.fsync ? 1 : 0} ${durability.timeoutMs}`;
    let batch = this.open.get(key);
    if (!batch) this.open.set(key, (batch = { slotKey, durability, writes: [], commands: 0 }));
    batch.writes.push(write);
    batch.commands += write.commands.length;
    if (batch.commands >= MAX_BATCH_COMMANDS) {
      this.open.delete(key);
      void this.send(batch);
      return;
    }
    // At the end of the tick: the emits begun together (a loop, Promise.all) share one wait.
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flushAll());
    }
  }

  private flushAll(): void {
    this.flushScheduled = false;
    const batches = [...this.open.values()];
    this.open.clear();
    for (const batch of batches) void this.send(batch);
  }

  private async send(batch: Batch): Promise<void> {
    const pipeline = this.conn.pipeline();
    for (const w of batch.writes) for (const [name, ...args] of w.commands) pipeline.call(name, ...args);
    pipeline.call(...waitCommand(batch.durability));
    let results: [Error | null, unknown][];
    try {
      results = ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
    } catch (err) {
      for (const w of batch.writes) w.reject(err);
      return;
    }
    const [waitError, waitReply] = results[results.length - 1] ?? [new Error('WAIT got no reply'), null];
    let confirmed: Confirmation;
    try {
      confirmed = waitError ? { replicas: 0, refused: waitError.message } : parseWaitReply(waitReply, batch.durability.fsync);
    } catch (err) {
      confirmed = { replicas: 0, refused: (err as Error).message };
    }
    let at = 0;
    const again: Pending[] = [];
    for (const w of batch.writes) {
      const replies = results.slice(at, at + w.commands.length);
      at += w.commands.length;
      if (this.onCluster && replies.some(([err]) => isRedirect(err)) && w.redirects < MAX_REDIRECTS) {
        // Not written on this node (a redirect is a refusal): sent again once the slot map is fresh.
        w.redirects++;
        again.push(w);
      } else w.resolve({ replies, confirmed });
    }
    if (again.length === 0) return;
    await new Promise<void>((done) => (this.conn as Cluster).refreshSlotsCache(() => done()));
    for (const w of again) this.enqueue(batch.slotKey, batch.durability, w);
  }
}
