import { defer, EMPTY, expand, type Observable } from 'rxjs';
import { dropDeleted, withDeliveryCounts, withoutWaiting } from './fetched-entries.js';
import type { LoopParts } from './loop-parts.js';
import type { StepResult } from './loop-vitals.js';

/**
 * Step 1, at every (re)start: this consumer's own pending entries, oldest first (XREADGROUP …
 * 0 on the command lane), settled read by read until a read comes back empty.
 */
export function selfDrain$(p: LoopParts): Observable<StepResult> {
  return defer(() => {
    const next = new Map(p.d.streams.map((s) => [s, '0']));
    const read$ = defer(() => drainOnce(p, next));
    return read$.pipe(expand((r) => (r.fetched > 0 && !p.stop.stopped ? read$ : EMPTY)));
  });
}

/** One read from where each stream's last one ended; a stream drops out once it reads back empty. */
async function drainOnce(p: LoopParts, next: Map<string, string>): Promise<StepResult> {
  const streams = [...next.keys()];
  if (streams.length === 0 || p.stop.stopped) return { step: 'drain', fetched: 0 };
  const { commands, lanes, options } = p.d;
  const entries = await commands.readGroup(
    lanes.command,
    options.consumer,
    streams,
    streams.map((s) => next.get(s)!),
    p.count,
  );
  for (const s of streams) {
    const last = entries.findLast((e) => e.stream === s);
    if (last) next.set(s, last.id);
    else next.delete(s);
  }
  p.marks.delivered(entries);
  const live = await dropDeleted(p, entries);
  p.lease.hold(live);
  await p.settle(await withoutWaiting(p, await withDeliveryCounts(p, live)), 'drain');
  return { step: 'drain', fetched: entries.length };
}
