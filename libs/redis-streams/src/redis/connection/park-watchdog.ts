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
export function watchPark<T>(conn: Redis, read: Promise<T>, blockMs: number, wake: () => Promise<unknown>): Promise<T> {
  // One promise, one timer and one listener per park (it runs once per batch): no race of promises.
  return new Promise<T>((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let over = false;
    const end = (): boolean => {
      if (over) return false;
      over = true;
      clearTimeout(timer);
      conn.off('close', onClose);
      return true;
    };
    const onClose = () => {
      if (end()) reject(new ParkLostError('the connection closed while parked'));
    };
    conn.once('close', onClose);
    read.then(
      (value) => end() && resolve(value),
      (err: unknown) => end() && reject(err),
    );
    timer = setTimeout(() => {
      // Wake it; the grace runs from Redis' answer to the UNBLOCK (a paused server answers late, not never).
      wake().then(
        () => {
          if (over) return;
          timer = setTimeout(() => {
            if (!end()) return;
            conn.disconnect(true);
            reject(new ParkLostError(`no answer to a park with BLOCK ${blockMs}, even ${PARK_GRACE_MS} ms after CLIENT UNBLOCK`));
          }, PARK_GRACE_MS);
        },
        // The UNBLOCK failed: so does the park (its connection is left as it is).
        (err: unknown) => end() && reject(err),
      );
    }, blockMs + PARK_GRACE_MS);
  });
}
