import { Test } from '@nestjs/testing';
import { RedisStreamsServer } from 'nestjs-redis-streams';
import { freePort } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { Recorder, StreamsController, uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

const start = useApps();

/** A Nest microservice of the test app's handlers on `server`, not listening yet (the test starts it, and closes both). */
async function appOn(server: RedisStreamsServer) {
  const moduleRef = await Test.createTestingModule({ controllers: [StreamsController], providers: [Recorder] }).compile();
  return moduleRef.createNestMicroservice({ strategy: server, logger: false });
}

/** A server whose Redis never answers (nothing listens on its port): its start goes on connecting until startupTimeoutMs. */
const unreachableServer = async (commandTimeoutMs: number) =>
  new RedisStreamsServer({
    connection: `redis://127.0.0.1:${await freePort()}`,
    keyPrefix: uniquePrefix(),
    startupTimeoutMs: 60_000,
    commandTimeoutMs,
  });

describe('start-up', () => {
  it('fails listen() after startupTimeoutMs when Redis is unreachable, naming the URL (password masked) and the cause', async () => {
    const port = await freePort(); // nothing listens on it
    const failure = start({ connection: `redis://worker:s3cret@127.0.0.1:${port}/2`, keyPrefix: uniquePrefix(), startupTimeoutMs: 500 });
    const error = await failure.then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error).toBeInstanceOf(Error);
    expect(error!.message).toMatch(
      new RegExp(`could not start within 500 ms: redis://worker:\\*\\*\\*@127\\.0\\.0\\.1:${port}/2 .*ECONNREFUSED`),
    );
    expect(error!.message).not.toContain('s3cret');
  });

  it('starts normally when Redis answers within the deadline', async () => {
    const app = await start({ connection: redis.url, keyPrefix: uniquePrefix(), startupTimeoutMs: 500 });
    expect(app.server.options.startupTimeoutMs).toBe(500);
  });
});

describe('start-up, unlucky', () => {
  it('names the connection error as the cause, not the retry that gave up on it', async () => {
    const port = await freePort(); // nothing listens on it
    const error = await start({ connection: `redis://127.0.0.1:${port}`, keyPrefix: uniquePrefix(), startupTimeoutMs: 2000 }).then(
      () => undefined,
      (err: unknown) => err as Error,
    );
    expect(error?.message).toMatch(
      new RegExp(`could not start within 2000 ms: redis://127\\.0\\.0\\.1:${port} unreachable: connect ECONNREFUSED`),
    );
  });

  it('rejects listen() when close() is called before the consumer started, and close() waits on none of its commands', async () => {
    // commandTimeoutMs past the test's own timeout (30 s): a close() that waited out the start's commands fails the test.
    const server = await unreachableServer(120_000);
    const app = await appOn(server);
    const listening = app.listen().then(
      () => 'resolved',
      (err: Error) => err.message,
    );
    // Closed while it is still trying to connect.
    await waitFor(
      () =>
        server.status !== undefined &&
        (() => {
          try {
            return server.unwrap().length === 2;
          } catch {
            return false;
          }
        })(),
      { message: 'listen() to be under way' },
    );
    // The start's commands wait on a Redis that never answers: close() cuts them, it does not wait out their deadline.
    await server.close();
    expect(await listening).toMatch(/closed before it started/);
    await app.close();
  });

  it('close() during a failing start, between two reconnect attempts, ends the connection and fails the commands it queued', async () => {
    const server = await unreachableServer(20_000);
    const app = await appOn(server);
    const listening = app.listen().catch(() => undefined);
    const command = () => {
      try {
        return server.unwrap()[0] as unknown as { status: string; offlineQueue: { length: number } };
      } catch {
        return undefined;
      }
    };
    // ioredis waits out its reconnect backoff without a socket, the start's INFO in its offline queue.
    await waitFor(() => (command()?.offlineQueue.length ?? 0) > 0 && command()?.status === 'reconnecting', {
      message: 'a start command queued while reconnecting',
    });
    const conn = command()!;
    await app.close();
    await listening;
    // Left queued, the command's commandTimeoutMs timer would keep the process alive after close().
    expect({ status: conn.status, queued: conn.offlineQueue.length }).toEqual({ status: 'end', queued: 0 });
  });

  it('close() while XGROUP CREATE is in flight resolves (the start it cut short never comes back to hold the loop)', async () => {
    const admin = redis.client();
    const server = new RedisStreamsServer({
      connection: redis.connection,
      group: 'g',
      consumer: 'c1',
      keyPrefix: uniquePrefix(),
      blockMs: 500,
    });
    const app = await appOn(server);
    // Writes paused: XGROUP CREATE waits in Redis until close() was called.
    await admin.call('CLIENT', 'PAUSE', '20000', 'WRITE');
    onTestFinished(async () => void (await redis.client().call('CLIENT', 'UNPAUSE')));
    const listening = app.listen().then(
      () => 'resolved',
      (err: Error) => err.message,
    );
    await waitFor(async () => /cmd=xgroup/.test(String(await admin.call('CLIENT', 'LIST', 'TYPE', 'normal'))), {
      message: 'XGROUP CREATE in flight',
    });
    const closing = server.close();
    await admin.call('CLIENT', 'UNPAUSE');
    let closed = false;
    void closing.then(() => (closed = true));
    await waitFor(() => closed, { message: 'close() to resolve', timeoutMs: 15_000 });
    expect(await listening).toMatch(/closed before it started/);
  });
});
