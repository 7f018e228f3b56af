import { Command, type Cluster } from 'ioredis';
import type { ResolvedDurability } from '../../options/durability-options.js';
import { slotOf } from '../../slots.js';
import { within } from '../../within.js';
import type { RedisConnection } from '../connection/connect.js';
import { parseWaitReply } from '../replies/replies.js';
import { waitCommand, type Confirmation, type RawCommand } from './replication-wait.js';

/** Each write's replies (`[error, reply]` per command, as a pipeline answers) and what the wait after them confirmed. */
export interface DurableResult {
  replies: [Error | null, unknown][];
  confirmed: Confirmation;
}

interface Pending {
  slotKey: string;
  commands: readonly RawCommand[];
  resolve: (result: DurableResult) => void;
  reject: (err: unknown) => void;
  /** Pipelines it was sent in and redirected (MOVED/ASK): not written, sent again after a slot refresh. */
  redirects: number;
  /** In a pipeline now (from then on its writer's giving up cannot unsend it). */
  sent: boolean;
  /** Its writer gave up before it was sent: never sent (a redirected one waiting for a slot refresh included). */
  withdrawn?: boolean;
  /** The group it waits in, while it waits. */
  group?: Group;
  /** Its commands in the last pipeline it was sent in. */
  sentCommands?: Command[];
}

/** The writes waiting for one master's next pipeline, and whether one of its pipelines is out. */
interface Group {
  durability: ResolvedDurability;
  open: Pending[];
  commands: number;
  sending: boolean;
  scheduled: boolean;
}

/** Commands of one pipeline: past it, the rest waits for the next one. */
const MAX_BATCH_COMMANDS = 1000;
/** A write redirected this often (a slot moving again and again) fails with the redirection. */
const MAX_REDIRECTS = 3;
/** The longest a slot refresh after a redirection is waited for before the writes go again anyway. */
const REFRESH_WITHIN_MS = 5000;

/** A durable write withdrawn before it was sent: nothing of it reached Redis. */
export class DurableWriteNotSent extends Error {
  constructor() {
    super('not sent: its master had not answered the writes before it in time, and it was withdrawn: nothing was written');
    this.name = 'DurableWriteNotSent';
  }
}

const isRedirect = (err: Error | null): boolean => err !== null && /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN) /.test(err.message);

/**
 * Writes whose replication their writer waits for (durable produce, durable acks), on a connection of
 * their own, so that a wait never holds the shared command connection. Writes bound for one master
 * (one node; on a cluster the master of their slot) and one durability go out in one pipeline followed
 * by one WAIT (or WAITAOF), which covers them all: WAIT covers what its connection wrote before it, and
 * the replication stream is ordered. One pipeline per master is out at a time, and what arrives
 * meanwhile goes in the next: a wait blocks its connection on Redis, so writes sent behind it would each
 * wait for a later offset in turn (with `appendfsync everysec`, a second each); batched, they share one.
 * On a cluster a write redirected (MOVED during a failover) was not written: ioredis does not re-send a
 * pipeline whose wait succeeded, so it is sent again here, in a later pipeline with its own wait, never
 * confirmed by a wait that ran on another node. Scripts go raw as EVAL: an ioredis re-send after NOSCRIPT
 * would run after the wait.
 */
export class DurableWrites {
  private readonly groups = new Map<string, Group>();

  constructor(
    private readonly conn: RedisConnection,
    private readonly onCluster: boolean,
  ) {}

  /** Sends `commands` (one write's, every key in `slotKey`'s slot) in the next pipeline of that slot's master, then the wait. */
  write(slotKey: string, durability: ResolvedDurability, commands: readonly RawCommand[], signal?: AbortSignal): Promise<DurableResult> {
    return new Promise<DurableResult>((resolve, reject) => {
      // Its writer gave up: one not yet in a pipeline is never sent (a write its caller was told failed must not
      // appear later, when a frozen master's pipeline ends); one sent may or may not have been written.
      const abandon = () => {
        // Its master did not answer in time: it may be frozen and replaced, and the next writes go where a fresh map says.
        if (this.onCluster) (this.conn as Partial<{ refreshAfterTimeout(): void }>).refreshAfterTimeout?.();
        const group = w.group;
        if (!w.sent) {
          if (group) {
            group.open.splice(group.open.indexOf(w), 1);
            group.commands -= w.commands.length;
          }
          w.withdrawn = true;
          reject(new DurableWriteNotSent());
        } else {
          // Sent, unanswered: ioredis would send it again when its node's connection closes (a frozen master dropped from
          // the pool after a failover), and the promoted replica would write it seconds after its caller was told.
          if (w.sentCommands) (this.conn as Partial<{ forget(commands: readonly Command[]): void }>).forget?.(w.sentCommands);
          reject(new Error('Command timed out'));
        }
      };
      const settled = () => signal?.removeEventListener('abort', abandon);
      const w: Pending = {
        slotKey,
        commands,
        resolve: (result) => (settled(), resolve(result)),
        reject: (err) => (settled(), reject(err)),
        redirects: 0,
        sent: false,
      };
      signal?.addEventListener('abort', abandon, { once: true });
      this.enqueue(w, durability);
    });
  }

  private enqueue(write: Pending, durability: ResolvedDurability): void {
    const key = `${this.masterOf(write.slotKey)} ${durability.replicas} ${durability.fsync ? 1 : 0} ${durability.timeoutMs}`;
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = { durability, open: [], commands: 0, sending: false, scheduled: false }));
    write.sent = false;
    write.group = group;
    group.open.push(write);
    group.commands += write.commands.length;
    if (group.sending || group.scheduled) return;
    // At the end of the tick: the writes begun together (a loop, Promise.all, lanes finishing) share one wait.
    group.scheduled = true;
    setImmediate(() => {
      group.scheduled = false;
      void this.send(key, group);
    });
  }

  /** Where a slot's writes go: its master as the cluster's slot map says (writes of one master share a pipeline), or the one node. */
  private masterOf(slotKey: string): string {
    if (!this.onCluster) return '';
    const slot = slotOf(slotKey);
    return (this.conn as Cluster).slots?.[slot]?.[0] ?? `slot ${slot}`;
  }

  private async send(key: string, group: Group): Promise<void> {
    if (group.sending || group.open.length === 0) return;
    group.sending = true;
    const writes: Pending[] = [];
    let count = 0;
    while (group.open.length > 0 && (writes.length === 0 || count + group.open[0]!.commands.length <= MAX_BATCH_COMMANDS)) {
      const w = group.open.shift()!;
      w.sent = true;
      w.group = undefined;
      writes.push(w);
      count += w.commands.length;
    }
    group.commands -= count;
    try {
      await this.sendBatch(writes, group.durability);
    } finally {
      group.sending = false;
      if (group.open.length > 0) void this.send(key, group);
      else this.groups.delete(key);
    }
  }

  private async sendBatch(writes: Pending[], durability: ResolvedDurability): Promise<void> {
    const pipeline = this.conn.pipeline() as ReturnType<RedisConnection['pipeline']> & { sendCommand(command: Command): unknown };
    for (const w of writes) {
      // Its own Command objects: what its writer gives up on can be told apart from the rest of the pipeline.
      w.sentCommands = w.commands.map(([name, ...args]) => new Command(name, args, { replyEncoding: 'utf8' }));
      for (const command of w.sentCommands) pipeline.sendCommand(command);
    }
    pipeline.call(...waitCommand(durability));
    let results: [Error | null, unknown][];
    try {
      results = ((await pipeline.exec()) ?? []) as [Error | null, unknown][];
    } catch (err) {
      for (const w of writes) w.reject(err);
      return;
    }
    const [waitError, waitReply] = results[results.length - 1] ?? [new Error('WAIT got no reply'), null];
    let confirmed: Confirmation;
    try {
      confirmed = waitError ? { replicas: 0, refused: waitError.message } : parseWaitReply(waitReply, durability.fsync);
    } catch (err) {
      confirmed = { replicas: 0, refused: (err as Error).message };
    }
    let at = 0;
    const again: Pending[] = [];
    for (const w of writes) {
      const replies = results.slice(at, at + w.commands.length);
      at += w.commands.length;
      if (this.onCluster && replies.some(([err]) => isRedirect(err)) && w.redirects < MAX_REDIRECTS) {
        // Not written on this node (a redirect is a refusal): sent again once the slot map is fresh, unless its writer gives up meanwhile.
        w.redirects++;
        w.sent = false;
        again.push(w);
      } else w.resolve({ replies, confirmed });
    }
    if (again.length === 0) return;
    // ioredis neither follows nor learns from a redirection in a pipeline whose wait succeeded: refreshed here
    // (bounded: a refresh that never answers must not hold the writes), or they would go to the former master again.
    await within(new Promise<void>((done) => (this.conn as Cluster).refreshSlotsCache(() => done())), REFRESH_WITHIN_MS, undefined);
    for (const w of again) if (!w.withdrawn) this.enqueue(w, durability);
  }
}
