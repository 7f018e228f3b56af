import type { Running } from '../consumer/watch/stuck-watch.js';
import { someIds } from '../id-list.js';
import type { Logger } from '../ports.js';
import { within } from '../within.js';
import type { Reader } from '../consumer/reader.js';

/** `1 entry`, `2 entries`. */
export const entries = (n: number): string => `${n} ${n === 1 ? 'entry' : 'entries'}`;

/** How many handler calls a shutdown line describes before "and N more entries". */
const CALLS_NAMED = 3;

/**
 * `"orders" 1-0 (handler running for 1200 ms)`, for the shutdown log: entries of one call (same
 * stream and age, next to each other: `running` is sorted by age) share a part, with a few ids.
 */
export function describeRunning(running: readonly Running[]): string {
  const calls: Running[][] = [];
  for (const r of running) {
    const last = calls.at(-1)?.[0];
    if (last && last.stream === r.stream && last.forMs === r.forMs) calls.at(-1)!.push(r);
    else calls.push([r]);
  }
  const parts = calls
    .slice(0, CALLS_NAMED)
    .map((call) => `"${call[0]!.stream}" ${someIds(call.map((r) => r.id))} (handler running for ${call[0]!.forMs} ms)`);
  const rest = calls.slice(CALLS_NAMED).reduce((n, call) => n + call.length, 0);
  return rest > 0 ? `${parts.join(', ')} and ${rest} more ${rest === 1 ? 'entry' : 'entries'}` : parts.join(', ');
}

/** Names what close() waits for: the entries whose handler runs, and how long they may take. */
export function logStopping(
  logger: Logger,
  { consumer, shutdownTimeoutMs: limitMs }: { consumer: string; shutdownTimeoutMs: number | undefined },
  running: readonly Running[],
): void {
  if (running.length === 0) {
    logger.log(`consumer "${consumer}" stopping: nothing in hand`);
    return;
  }
  const limit = limitMs === undefined ? 'no shutdownTimeoutMs' : `at most ${limitMs} ms`;
  logger.log(`consumer "${consumer}" stopping: waiting for ${entries(running.length)} in hand (${limit}): ${describeRunning(running)}`);
}

/**
 * What ends `close()`'s wait on the entries in hand early (they stay pending, see settleInHand):
 * the host's choice. Watched only while something is in hand; `interrupted` resolves with why
 * (`SIGTERM`), `dispose` stops watching.
 */
export type CloseInterrupt = () => { interrupted: Promise<string>; dispose: () => void };

/** Runs `closing` with `interrupt` watched when `watch` (something is in hand), and stops watching when it ends. */
export async function untilInterrupted(
  watch: boolean,
  interrupt: CloseInterrupt,
  closing: (interrupted: Promise<string>) => Promise<void>,
): Promise<void> {
  if (!watch) return closing(new Promise<string>(() => {}));
  const watched = interrupt();
  try {
    await closing(watched.interrupted);
  } finally {
    watched.dispose();
  }
}

/**
 * Waits for a reader to finish the entries in hand, at most `limitMs` (undefined: as long as it
 * takes) or until `interrupted` (a second signal, an abort); then abandons them, left pending.
 */
export async function settleInHand(
  reader: Reader,
  limitMs: number | undefined,
  interrupted: Promise<string>,
  logger: Logger,
): Promise<void> {
  const settled = reader.done.then(() => 'settled' as const);
  const outcome = await (limitMs === undefined
    ? Promise.race([settled, interrupted])
    : within(Promise.race([settled, interrupted]), limitMs, 'timeout' as const));
  if (outcome === 'settled') return;
  // Still pending under this consumer: self-drain (same name) or a peer's reclaim runs them again.
  const running = reader.running();
  const notStarted = reader.inHand().length - running.length;
  const why = outcome === 'timeout' ? `shutdownTimeoutMs (${limitMs}) passed` : `${outcome} while closing`;
  // The handler cannot be cancelled, but nothing of ours waits for it: no lease renewal,
  // no retry timer, no late ack. The line says what Redis confirmed of the hand-back.
  const handedBack = await reader.abandon();
  const unstarted = `; ${notStarted} not started, ${handedBack ? 'handed back' : 'their hand-back not confirmed by Redis (left pending under this consumer)'}`;
  logger.error(
    `${why}: abandoning ${entries(running.length)} in hand, left pending: ${describeRunning(running) || 'none'}${notStarted > 0 ? unstarted : ''}`,
  );
  reader.cut();
}
