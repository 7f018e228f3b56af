import type { WritePacket } from '@nestjs/microservices';
import { concatMap, lastValueFrom, type Observable } from 'rxjs';

/**
 * Writes a request handler's values as replies, in order. The last value travels with the
 * `done` flag, so a single-value handler costs one reply entry; a failure ends the stream
 * with an error reply. Rejects only when a reply cannot be written (Redis).
 */
export async function writeReplies(values$: Observable<unknown>, write: (packet: WritePacket) => Promise<void>): Promise<void> {
  let held: { value: unknown } | undefined;
  let failure: { err: unknown } | undefined;
  await lastValueFrom(
    values$.pipe(
      concatMap(async (value) => {
        if (held) await write({ response: held.value }).catch((err: unknown) => Promise.reject(new WriteFailed(err)));
        held = { value };
      }),
    ),
    { defaultValue: undefined },
  ).catch((err: unknown) => {
    // A reply Redis refused is not the handler's failure: the entry must stay pending.
    if (err instanceof WriteFailed) throw err.cause;
    failure = { err };
  });
  if (failure) {
    if (held) await write({ response: held.value });
    return write({ err: failure.err, isDisposed: true });
  }
  return write({ ...(held ? { response: held.value } : {}), isDisposed: true });
}

class WriteFailed {
  constructor(readonly cause: unknown) {}
}
