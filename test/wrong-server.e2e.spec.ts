import { createServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { lastValueFrom } from 'rxjs';
import { RedisStreamsClient, RedisStreamsServer } from 'nestjs-redis-streams';
import { runCli } from './support/cli.js';
import { CLUSTER_MODE, startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';

// Issue 35, item 7: a server that wants a password the connection does not give, and a port that is no
// Redis at all, each get one message that names the fix, at once (not Redis' raw NOAUTH, nor ioredis'
// "Unknown RESP type … Please report this." after startupTimeoutMs).

let redis: TestRedis;
let web: Server;
let webUrl: string;
let slammer: NetServer;
let slammerUrl: string;

beforeAll(async () => {
  redis = await startRedis({ standalone: true });
  await redis.client().config('SET', 'requirepass', 'only-the-admin-knows');
  // An HTTP server: what it answers to RESP is an HTTP status line ("HTTP/1.1 400 Bad Request").
  web = createServer((_req, res) => res.end('<html>not redis</html>'));
  await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
  webUrl = `redis://127.0.0.1:${(web.address() as AddressInfo).port}`;
  // One that answers at once and closes without reading what it was sent (as Python's http.server
  // does): its kernel resets the connection, and the client's next write may fail (EPIPE, ECONNRESET)
  // before the reply is parsed, or the reply is lost.
  slammer = createNetServer({ pauseOnConnect: true }, (socket) => {
    socket.on('error', () => undefined);
    socket.write('HTTP/1.0 400 Bad Request\r\n\r\n<html>', () => socket.destroy());
  });
  await new Promise<void>((resolve) => slammer.listen(0, '127.0.0.1', resolve));
  slammerUrl = `redis://127.0.0.1:${(slammer.address() as AddressInfo).port}`;
});
afterAll(async () => {
  web?.closeAllConnections();
  await new Promise((resolve) => web?.close(resolve));
  await new Promise((resolve) => slammer?.close(resolve));
  await redis?.stop();
});

const NOAUTH = /NOAUTH the server requires a password and the connection gives none: add it to the connection URL/;
const NOT_REDIS = /does not answer in the Redis protocol \(Unknown RESP type \d+ "H"\): is this the port of a Redis server\?/;

/** listen()'s failure, with a start deadline long past any test's: only a failure at once comes back. */
async function listenFailure(connection: string): Promise<Error> {
  const server = new RedisStreamsServer({ connection, group: 'g', keyPrefix: uniquePrefix(), startupTimeoutMs: 600_000 });
  server.addHandler('orders', async () => undefined, true);
  const failure = await new Promise<unknown>((resolve) => server.listen((err) => resolve(err)));
  await server.close();
  return failure as Error;
}

// The processes and ports are of this file's own: one run covers them.
describe.skipIf(CLUSTER_MODE)('a server that is not what the connection expects', () => {
  it('listen() fails at once, naming the fix: a password the server wants, a port that is no Redis', async () => {
    const noPassword = await listenFailure(redis.url);
    expect(noPassword.message).toMatch(NOAUTH);
    expect(noPassword.message).not.toContain('HELLO must be called');
    expect((await listenFailure(webUrl)).message).toMatch(NOT_REDIS);
  });

  it('a producer says the same', async () => {
    for (const [connection, said] of [
      [redis.url, NOAUTH],
      [webUrl, NOT_REDIS],
    ] as const) {
      const client = new RedisStreamsClient({ connection, commandTimeoutMs: 60_000 });
      client.on('error', () => undefined);
      const error = await lastValueFrom(client.emit('orders', { n: 1 })).then(
        () => undefined,
        (err: unknown) => err as Error,
      );
      await client.close();
      expect(error?.message).toMatch(said);
    }
  });

  it('the CLI says the same', async () => {
    for (const [url, said] of [
      [redis.url, NOAUTH],
      [webUrl, NOT_REDIS],
    ] as const) {
      const run = await runCli(redis, ['inspect', 'orders', '--url', url, '--timeout-ms', '60000']);
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(said);
    }
  });

  it('the CLI says so whichever comes first: the reply that is no RESP, or the reset of the closed connection', async () => {
    const commands = [
      ['inspect', 'orders'],
      ['dlq', 'list', 'orders:dead'],
      ['pending', 'peek', 'orders', '--group', 'g', '1-0'],
      ['consumers', 'prune', 'orders', '--group', 'g', '--idle-ms', '1000'],
    ];
    for (let round = 0; round < 5; round++) {
      for (const command of commands) {
        const run = await runCli(redis, [...command, '--url', slammerUrl, '--timeout-ms', '60000']);
        expect(run.code, command.join(' ')).toBe(1);
        expect(run.stderr, command.join(' ')).toMatch(/is this the port of a Redis server\?/);
      }
    }
  });
});
