import type { Redis } from 'ioredis';
import { waitFor } from './wait-for.js';

/** Waits until a blocking lane whose connection name contains `name` is parked in XREADGROUP … BLOCK on the server. */
export async function waitParked(admin: Redis, name = ':blocking', message = 'the blocking lane to park'): Promise<void> {
  await waitFor(
    async () =>
      String(await admin.call('CLIENT', 'LIST', 'TYPE', 'normal'))
        .split('\n')
        .some((row) => row.includes(name) && / cmd=xreadgroup /.test(row) && / flags=b /.test(row)),
    { message },
  );
}
