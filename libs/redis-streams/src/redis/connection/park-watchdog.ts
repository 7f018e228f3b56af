import type { Redis } from 'ioredis';

/** How long past BLOCK (and again past CLIENT UNBLOCK) a park may go unanswered before its connection counts as dead. */
export const PARK_GRACE_MS = 2000;

/** A park whose connection closed or went silent: whatever it delivered is in this consumer's PEL, unseen. */
export class ParkLostError extends Error {
  constructor(reason: string) {
    super(`blocking read lost: ${reason}`);
    this.name = 'ParkLostError';
  }
}

/**
 * Redis' answer to a blocking read sent on `conn`, however late the event loop gets to it: a
 * handler that held the loop past BLOCK must not cost the entries Redis delivered meanwhile.
 * Past BLOCK + grace the park is woken (`wake`, CLIENT UNBLOCK) and waited for once more; a
 * connection silent even then, or closed while parked, is dropped and the park fails with
 * {@link ParkLostError} (what it delivered, if anything, is in this consumer's PEL, where a
 * restart's self-drain finds it).
 */
export async function watchPark<T>(conn: Redis, read: Promise<T>, blockMs: number, wake: () => Promise<unknown>): Promise<T> {
  const timers: NodeJS.Timeout[] = [];
  const after = (ms: number) => new Promise<'silent'>((resolve) => timers.push(setTimeout(() => resolve('silent'), ms)));
  let onClose: (() => void) | undefined;
  const lost = new Promise<never>((_, reject) => {
    onClose = () => reject(new ParkLostError('the connection closed while parked'));
    conn.once('close', onClose);
  });
  lost.catch(() => undefined);
  try {
    if ((await Promise.race([read, lost, after(blockMs + PARK_GRACE_MS)])) !== 'silent') return await read;
    // Wake it; the grace runs from Redis' answer to the UNBLOCK (a paused server answers late, not never).
    const woken = wake().then(() => after(PARK_GRACE_MS));
    if ((await Promise.race([read, lost, woken])) !== 'silent') return await read;
    conn.disconnect(true);
    throw new ParkLostError(`no answer to a park with BLOCK ${blockMs}, even ${PARK_GRACE_MS} ms after CLIENT UNBLOCK`);
  } finally {
    for (const t of timers) clearTimeout(t);
    conn.off('close', onClose!);
  }
}
