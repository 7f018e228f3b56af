import type { Logger } from '../ports.js';
import { within } from '../within.js';
import type { Reader } from './reader.js';

/** Waits for a reader to finish the entry in hand, at most `limitMs` (undefined: as long as it takes). */
export async function settleInHand(reader: Reader, limitMs: number | undefined, logger: Logger): Promise<void> {
  if (limitMs === undefined) return reader.done;
  const settled = await within(
    reader.done.then(() => true),
    limitMs,
    false,
  );
  if (settled) return;
  // Still pending under this consumer: self-drain (same name) or a peer's reclaim runs them again.
  const abandoned = reader.loop.inHand();
  logger.error(
    `shutdownTimeoutMs (${limitMs}) passed: abandoning ${abandoned.length} entries in hand, left pending: ${abandoned.map((e) => `${e.stream} ${e.id}`).join(', ')}`,
  );
  // The handler cannot be cancelled, but nothing of ours waits for it: no lease renewal,
  // no retry timer, no late ack.
  await reader.loop.abandon();
  reader.run.unsubscribe();
}
