import { RedisStreamsClient } from 'nestjs-redis-streams';
import { randomUUID } from 'node:crypto';
import { inspect } from 'node:util';
import { lastValueFrom } from 'rxjs';
import { requireBuilt } from './support/built.js';
import { runFixtureToExit } from './support/fixture-process.js';
import { captureLogs } from './support/logs.js';
import { useProducers } from './support/producer.js';
import { CLUSTER_MODE, freePort } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

// Issue 22, items 5 and 6: a producer's failures name their cause, and one nobody subscribed to is logged.

const redis = useRedis({ standalone: true });
const producer = useProducers();

/** An emit's rejection as Node would print it (message, cause, own properties). */
async function emitFailure(client: RedisStreamsClient, pattern = 'orders'): Promise<{ message: string; printed: string }> {
  const err = await lastValueFrom(client.emit(pattern, { n: 1 })).then(
    () => expect.fail('emit should have failed'),
    (e: unknown) => e as Error,
  );
  return { message: err.message, printed: inspect(err, { depth: 20 }) };
}

describe.skipIf(CLUSTER_MODE)('a failed emit names its cause (issue 22 item 5)', () => {
  it('a wrong password: the credentials refused (WRONGPASS) at the masked URL, not "not reachable", and never the password', async () => {
    const user = 'producer';
    const wrong = `wrong-${randomUUID()}`;
    await redis.client().call('ACL', 'SETUSER', user, 'reset', 'on', `>right-${randomUUID()}`, '~*', '+@all');
    const logs = captureLogs();
    const { client } = await producer(
      { connection: `redis://${user}:${wrong}@127.0.0.1:${redis.port}`, commandTimeoutMs: 500 },
      logs.logger,
    );
    let attempts = 0;
    client.on('error', () => void attempts++);
    const { message, printed } = await emitFailure(client);
    expect(message).toMatch(/XADD to stream "orders" failed: /);
    expect(message).toContain('WRONGPASS');
    expect(message).toContain(`redis://${user}:***@127.0.0.1:${redis.port}`);
    expect(message).not.toMatch(/not reachable/);
    // Item 7: one line for the connection's trouble, not one per reconnect attempt (each attempt is an error event).
    await waitFor(() => attempts >= 3, { message: 'three refused attempts' });
    expect(logs.from('RedisStreamsClient').filter((l) => l.includes('WRONGPASS'))).toHaveLength(1);
    for (const output of [printed, logs.text()]) {
      expect(output).not.toContain(wrong);
      expect(output).not.toContain(encodeURIComponent(wrong));
    }
  });

  it('a port nobody listens on: ECONNREFUSED 127.0.0.1:<port> and the URL', async () => {
    const port = await freePort();
    const logs = captureLogs();
    const { client } = await producer({ connection: `redis://127.0.0.1:${port}`, commandTimeoutMs: 500 }, logs.logger);
    const { message } = await emitFailure(client);
    expect(message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
    expect(message).toContain(`redis://127.0.0.1:${port}`);
    expect(message).not.toMatch(/Reached the max retries|maxRetriesPerRequest/);
    expect(logs.from('RedisStreamsClient')).toEqual([
      expect.stringMatching(
        new RegExp(
          `^warn cannot connect to redis://127\\.0\\.0\\.1:${port} \\(connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\), retrying in \\d+ ms$`,
        ),
      ),
    ]);
  });
});

describe.skipIf(CLUSTER_MODE)('a fire-and-forget emit that Redis refuses (issue 22 item 6)', () => {
  const failedLines = (lines: string[], stream: string) => lines.filter((l) => l.includes(`XADD to stream "${stream}" failed`));

  it('is logged once, with the stream and the reason, when nobody subscribed; not when the caller got the error', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await redis.client().set(stream, 'a string, not a stream');
    const logs = captureLogs();
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix }, logs.logger);

    // Observed: the caller gets the error, the log does not repeat it.
    await expect(lastValueFrom(client.emit('orders', { n: 1 }))).rejects.toThrow(/WRONGTYPE/);
    // Not observed (Nest's emit is hot: it writes anyway), as in Nest's own examples.
    client.emit('orders', { n: 2 });
    await waitFor(() => failedLines(logs.from('RedisStreamsClient'), stream).length > 0, {
      message: 'the unobserved failure to be logged',
    });
    const lines = failedLines(logs.from('RedisStreamsClient'), stream);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^(warn|error) /);
    expect(lines[0]).toContain('WRONGTYPE');
  });

  it('an app logger that throws on that line costs the line (on stderr), not the process (review-x)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await redis.client().set(stream, 'a string, not a stream');
    const thrown: string[] = [];
    const throwing = {
      log: () => {},
      warn: (m: unknown) => {
        thrown.push(String(m));
        throw new Error('log sink down');
      },
      error: (m: unknown) => {
        thrown.push(String(m));
        throw new Error('log sink down');
      },
    };
    const { client } = await producer({ connection: redis.url, keyPrefix: prefix }, throwing);
    const stderr: string[] = [];
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
    try {
      // Before: the throw left rxjs' error callback as an uncaught exception (Vitest reports it as this test's error).
      client.emit('orders', { n: 1 });
      await waitFor(() => stderr.some((l) => l.includes(`XADD to stream "${stream}" failed`)), { message: 'the line on stderr' });
    } finally {
      write.mockRestore();
    }
    expect(thrown.filter((l) => l.includes(`XADD to stream "${stream}" failed`))).toHaveLength(1);
    expect(stderr.filter((l) => l.includes(`XADD to stream "${stream}" failed`))).toEqual([
      expect.stringMatching(/^\[nestjs-redis-streams\] the logger threw \(log sink down\); its line: .*WRONGTYPE/),
    ]);
    // The client still works.
    await redis.client().del(stream);
    await expect(lastValueFrom(client.emit('orders', { n: 2 }))).resolves.toBeDefined();
  });
});

describe.skipIf(CLUSTER_MODE)('close() is terminal for the client (review of issue 22 item 6)', () => {
  it('an emit in flight at close() is written on the open connection, an emit after close() fails with "client closed", and the process exits by itself', async () => {
    requireBuilt('libs/redis-streams/dist/esm/index.js');
    const prefix = uniquePrefix();
    // A connection opened again after close() would keep the child alive.
    const { code, out } = await runFixtureToExit('emit-at-close.mjs', [redis.url, prefix]);
    expect(code, out).toBe(0);
    const report = JSON.parse(out.trim().split('\n').at(-1)!) as {
      inFlight: { id?: string; error?: string } | 'pending';
      afterClose: { id?: string; error?: string; name?: string };
    };
    expect(report.inFlight).toEqual({ id: expect.stringMatching(/^\d+-\d+$/) });
    expect(await redis.client().xlen(`${prefix}in-flight`)).toBe(1);
    expect(report.afterClose).toEqual({ error: expect.stringMatching(/client closed/), name: 'RedisStreamsError' });
    expect(await redis.client().exists(`${prefix}after-close`)).toBe(0);
  });
});
