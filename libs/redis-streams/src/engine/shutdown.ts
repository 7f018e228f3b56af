import type { Running } from '../consumer/stuck-watch.js';
import { someIds } from '../id-list.js';
import type { Logger } from '../ports.js';
import { within } from '../within.js';
import type { Reader } from './reader.js';

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type StopSignalName = (typeof SIGNALS)[number];

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
 * Listens for SIGTERM/SIGINT while `close()` waits on handlers: a second signal (Nest's shutdown
 * hooks handle the first) ends the wait. Nest's own listeners stay as they are. `dispose()`
 * removes ours; when nobody else listened for the signal, it is raised again then, so its
 * default action (ending the process) is not swallowed.
 */
export function watchSignals(): { signalled: Promise<StopSignalName>; dispose: () => void } {
  let received: StopSignalName | undefined;
  let alone = false;
  let resolve!: (signal: StopSignalName) => void;
  const signalled = new Promise<StopSignalName>((r) => (resolve = r));
  const listeners = SIGNALS.map((signal) => {
    const listener = () => {
      if (received) return;
      received = signal;
      alone = process.listenerCount(signal) === 1;
      resolve(signal);
    };
    process.on(signal, listener);
    return [signal, listener] as const;
  });
  return {
    signalled,
    dispose: () => {
      for (const [signal, listener] of listeners) process.removeListener(signal, listener);
      if (received && alone) process.kill(process.pid, received);
    },
  };
}

/** Runs `closing` with SIGTERM/SIGINT watched (see watchSignals) when `watch` (something is in hand), and stops watching when it ends. */
export async function untilSecondSignal(watch: boolean, closing: (signalled: Promise<string>) => Promise<void>): Promise<void> {
  if (!watch) return closing(new Promise<string>(() => {}));
  const signals = watchSignals();
  try {
    await closing(signals.signalled);
  } finally {
    signals.dispose();
  }
}

/**
 * Waits for a reader to finish the entries in hand, at most `limitMs` (undefined: as long as it
 * takes) or until `interrupted` (a second signal); then abandons them, left pending.
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
  const running = reader.loop.running();
  const notStarted = reader.loop.inHand().length - running.length;
  const why = outcome === 'timeout' ? `shutdownTimeoutMs (${limitMs}) passed` : `${outcome} while closing`;
  // The handler cannot be cancelled, but nothing of ours waits for it: no lease renewal,
  // no retry timer, no late ack. The line says what Redis confirmed of the hand-back.
  const handedBack = await reader.loop.abandon();
  const unstarted = `; ${notStarted} not started, ${handedBack ? 'handed back' : 'their hand-back not confirmed by Redis (left pending under this consumer)'}`;
  logger.error(
    `${why}: abandoning ${entries(running.length)} in hand, left pending: ${describeRunning(running) || 'none'}${notStarted > 0 ? unstarted : ''}`,
  );
  reader.run.unsubscribe();
}
