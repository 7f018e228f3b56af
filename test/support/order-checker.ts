import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { onTestFinished } from 'vitest';

/**
 * The ordering checker: every handling appends `S|E|F <pid> <stream> <id> <key>` to one file
 * (O_APPEND: one host-wide order of lines, kept whatever happens to the process that wrote it),
 * the test appends `K <pid>` once it killed a worker. `check()` then asserts, per key: no handling
 * starts while another of the key is open (one whose process was killed ends at its `K`), ids in
 * increasing order (the same id again is a retry), and every produced entry handled (`E`) or
 * dead-lettered.
 */
export class OrderLog {
  readonly path = join(tmpdir(), `order-${randomUUID()}.log`);

  /** Made inside a test: its file goes when the test passed (a failed test's is kept, to be read). */
  constructor() {
    writeFileSync(this.path, '');
    onTestFinished(({ task }) => {
      if (task.result?.state === 'pass') rmSync(this.path, { force: true });
    });
  }

  killed(pid: number): void {
    appendFileSync(this.path, `K ${pid}\n`);
  }

  lines(): string[] {
    return readFileSync(this.path, 'utf8').split('\n').filter(Boolean);
  }

  /** Entries ended well (`E`), as `stream id`. */
  handled(): Set<string> {
    const done = new Set<string>();
    for (const line of this.lines()) {
      const [kind, , stream, id] = line.split(' ');
      if (kind === 'E') done.add(`${stream} ${id}`);
    }
    return done;
  }

  /** Violations of the guarantee (empty when it held), and figures of what the log shows. */
  check(produced: Iterable<string>, deadLettered: Iterable<string> = []): { violations: string[]; starts: number; maxParallel: number } {
    const violations: string[] = [];
    const dead = new Set<string>();
    const open = new Map<string, { pid: string; id: string }>();
    const last = new Map<string, string>();
    const done = new Set<string>(deadLettered);
    let starts = 0;
    let running = 0;
    let maxParallel = 0;
    for (const line of this.lines()) {
      const parts = line.split(' ');
      const kind = parts[0]!;
      if (kind === 'K') {
        dead.add(parts[1]!);
        for (const [key, o] of open) if (o.pid === parts[1]) open.delete(key);
        continue;
      }
      const [, pid, stream, id] = parts as [string, string, string, string];
      const key = `${stream} ${parts.slice(4).join(' ')}`;
      if (kind === 'S') {
        starts++;
        running++;
        maxParallel = Math.max(maxParallel, running);
        const o = open.get(key);
        if (o && !dead.has(o.pid)) violations.push(`key ${key}: ${id} (pid ${pid}) started while ${o.id} (pid ${o.pid}) ran`);
        const before = last.get(key);
        if (before !== undefined && compareIds(id, before) < 0) violations.push(`key ${key}: ${id} handled after ${before}`);
        if (before === undefined || compareIds(id, before) > 0) last.set(key, id);
        open.set(key, { pid, id });
      } else {
        running--;
        if (open.get(key)?.id === id) open.delete(key);
        if (kind === 'E') done.add(`${stream} ${id}`);
      }
    }
    for (const entry of produced) if (!done.has(entry)) violations.push(`entry ${entry} never handled nor dead-lettered`);
    return { violations, starts, maxParallel };
  }
}

/** Stream ids compared as the numbers they are (`ms-seq`). */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am !== bm ? (am < bm ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}

/** What a worker's handler does with the checker's log: `S` before, `E` or `F` after (sync appends: a kill loses none written). */
export function recordHandling(path: string, stream: string, id: string, key: string): { end(ok: boolean): void } {
  appendFileSync(path, `S ${process.pid} ${stream} ${id} ${key}\n`);
  return { end: (ok) => appendFileSync(path, `${ok ? 'E' : 'F'} ${process.pid} ${stream} ${id} ${key}\n`) };
}

/** The context a recording handler reads (StreamContext and RedisStreamsContext alike). */
interface HandlingContext {
  getStream(): string;
  getId(): string;
  getFields(): Record<string, string>;
  getDeliveryCount(): number;
}

/** A handler that records in the checker's log, taking the payload's `ms` (else 0–3 ms) and failing its first `fail` deliveries. */
export function recording(log: OrderLog) {
  return async (payload: { ms?: number; fail?: number }, ctx: HandlingContext): Promise<void> => {
    const h = recordHandling(log.path, ctx.getStream(), ctx.getId(), ctx.getFields().partitionKey ?? '-');
    let ok = false;
    try {
      await new Promise((resolve) => setTimeout(resolve, payload.ms ?? Math.random() * 3));
      if (ctx.getDeliveryCount() <= (payload.fail ?? 0)) throw new Error(`fails delivery ${ctx.getDeliveryCount()}`);
      ok = true;
    } finally {
      h.end(ok);
    }
  };
}
