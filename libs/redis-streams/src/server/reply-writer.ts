import type { WritePacket } from '@nestjs/microservices';
import { concatMap, lastValueFrom, type Observable } from 'rxjs';
import { UnserializableResult } from '../codec/reply-codec.js';

/**
 * Writes a request handler's values as replies, in order. The last value travels with the
 * `done` flag, so a single-value handler costs one reply entry; a failure ends the stream
 * with an error reply, and so does a value the serializer refuses (the handler's outcome: the
 * values after it are dropped). Rejects only when a reply cannot be written (Redis).
 */
export async function writeReplies(values$: Observable<unknown>, write: (packet: WritePacket) => Promise<void>): Promise<void> {
  let held: { value: unknown } | undefined;
  let failure: { err: unknown } | undefined;
  let ended = false;
  await lastValueFrom(
    values$.pipe(
      concatMap(async (value) => {
        if (held && !(await writeValue(write, held.value, false).catch((err: unknown) => Promise.reject(new WriteFailed(err)))))
          throw ENDED;
        held = { value };
      }),
    ),
    { defaultValue: undefined },
  ).catch((err: unknown) => {
    // Answered with an error already: the handler's stream is unsubscribed, nothing more is written.
    if (err === ENDED) ended = true;
    // A reply Redis refused is not the handler's failure: the entry must stay pending.
    else if (err instanceof WriteFailed) throw err.cause;
    else failure = { err };
  });
  if (ended) return;
  if (failure) {
    if (held && !(await writeValue(write, held.value, false))) return;
    return write({ err: failure.err, isDisposed: true });
  }
  if (!held) return write({ isDisposed: true });
  await writeValue(write, held.value, true);
}

/** One value; false when the serializer refused it and the caller was answered with an error instead (the stream is over). */
async function writeValue(write: (packet: WritePacket) => Promise<void>, value: unknown, done: boolean): Promise<boolean> {
  try {
    await write(done ? { response: value, isDisposed: true } : { response: value });
    return true;
  } catch (err) {
    if (!(err instanceof UnserializableResult)) throw err;
    await write({ err: err.reply, isDisposed: true });
    return false;
  }
}

const ENDED = Symbol('ended');

class WriteFailed {
  constructor(readonly cause: unknown) {}
}
