/**
 * Issue 22 item 3: a dead letter, the `settled` event and the transport's log carry the handler's
 * own error (class and message; the stack in the log), not the "Internal server error" Nest's
 * default RPC exception filter puts in its place; a user's exception filter still decides.
 */
import { Catch, Controller, UseFilters, type ArgumentsHost, type RpcExceptionFilter } from '@nestjs/common';
import { BaseRpcExceptionFilter, Ctx, MessagePattern, Payload, RpcException } from '@nestjs/microservices';
import { REDIS_STREAMS_TRANSPORT, RedisStreamsContext, StreamPattern, type DeadLetter, type SettledEvent } from 'nestjs-redis-streams';
import { lastValueFrom, throwError } from 'rxjs';
import { decodeDeadLetter } from '../libs/redis-streams/src/codec/dead-letter-codec.js';
import { addOrders, BatchLog, batchController } from './support/batch-app.js';
import { captureLogs } from './support/logs.js';
import { deadLetterKey } from './support/redis-server.js';
import { useProducers } from './support/producer.js';
import { Recorder, RequestsController, uniquePrefix, useApps, type TestApp } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();
const producer = useProducers();

const deadLetters = async (key: string): Promise<DeadLetter[]> =>
  (await redis.client().xrange(deadLetterKey(key), '-', '+')).map(([id, fields]) => decodeDeadLetter(id, fields));

class CardDeclined extends Error {}
class PaymentRefused extends Error {
  override name = 'PaymentRefused';
}

/** Mapped by the user's own filter: what it returns is what the transport must see. */
class MappedByFilter extends Error {}
@Catch()
class MapToOwnError implements RpcExceptionFilter {
  catch(exception: unknown) {
    return throwError(() => new MappedByFilter(`mapped: ${(exception as Error).message}`));
  }
}
/** Delegates to Nest's default filter, as Nest's docs show: the default's replacement must not hide the original. */
@Catch()
class DelegateToDefault extends BaseRpcExceptionFilter {
  override catch(exception: unknown, host: ArgumentsHost) {
    return super.catch(exception, host);
  }
}

@Controller()
class Filtered {
  @StreamPattern('mapped')
  @UseFilters(MapToOwnError)
  mapped(@Payload() _p: unknown, @Ctx() _ctx: RedisStreamsContext) {
    throw new Error('gateway timeout');
  }

  @StreamPattern('delegated')
  @UseFilters(DelegateToDefault)
  delegated(@Payload() _p: unknown, @Ctx() _ctx: RedisStreamsContext) {
    throw new CardDeclined('card 4242 declined');
  }
}

async function startWithLogs(extra: { controllers?: unknown[]; providers?: unknown[] } = {}) {
  const logs = captureLogs();
  const app = await start(
    { connection: redis.connection, group: 'g', consumer: 'c', keyPrefix: uniquePrefix(), blockMs: 50, minIdleMs: 200, maxDeliveries: 2 },
    { ...extra, logger: logs.logger } as Parameters<typeof start>[1],
  );
  return { app, logs };
}

/** Runs one entry through two failed deliveries; the settled events and the dead letter's error. */
async function deadLetterOf(app: TestApp, pattern = 'orders'): Promise<{ settled: SettledEvent[]; letter: DeadLetter }> {
  await redis.client().xadd(app.key(pattern), '*', 'order_id', '7');
  await waitFor(() => app.settled.some((e) => e.outcome === 'dead-lettered'), { message: 'the entry to be dead-lettered' });
  const [letter] = await deadLetters(app.key(pattern));
  return { settled: app.settled.slice(), letter: letter! };
}

describe("handler errors: the dead letter, the settled event and the log carry the handler's own error", () => {
  it('a plain Error: class and message in the dead letter, the settled events carry the thrown object, the log has its stack', async () => {
    const { app, logs } = await startWithLogs();
    const thrown: Error[] = [];
    app.recorder.behavior = () => {
      const err = new Error('boom: card declined');
      thrown.push(err);
      throw err;
    };
    const { settled, letter } = await deadLetterOf(app);

    expect(letter.error).toBe('handler failed on delivery 2 of 2: Error: boom: card declined');
    expect(settled.map((e) => e.outcome)).toEqual(['failed', 'dead-lettered']);
    expect(settled.map((e) => e.error)).toEqual(thrown);
    expect(settled[0]!.error).toBe(thrown[0]);
    expect(settled[1]!.error).toBe(thrown[1]);
    const records = logs.records('RedisStreamsServer').filter((r) => r.line.includes('boom'));
    expect(records.map((r) => r.line)).toEqual([
      expect.stringMatching(
        /^error handler for stream ".*orders" failed on entry .* \(delivery 1 of 2\): Error: boom: card declined; left pending, next try once idle \d+ ms \(minIdleMs − leaseRenewMs: no retry policy\)$/,
      ),
      expect.stringMatching(/^error entry .*: handler failed on delivery 2 of 2: Error: boom: card declined; moved to ".*dead" as /),
    ]);
    for (const r of records) {
      expect(r.stack).toMatch(/^Error: boom: card declined\n\s+at /);
      expect(r.stack).toContain('handler-errors.e2e.spec.ts');
    }
    expect(logs.from('RedisStreamsServer').join('\n')).not.toContain('Internal server error');
    // Said once: the transport's line (masked, escaped, with the stack) is the event's only one; Nest's
    // default filter would log the raw error a second time, unmasked.
    expect(logs.from('RpcExceptionsHandler')).toEqual([]);
  });

  it('an Error subclass, a thrown string, a plain object and an RpcException are each named by what they are', async () => {
    const { app } = await startWithLogs();
    const cases: { label: string; value: () => unknown; described: string }[] = [
      { label: 'subclass', value: () => new CardDeclined('card 4242 declined'), described: 'CardDeclined: card 4242 declined' },
      { label: 'named', value: () => new PaymentRefused('limit reached'), described: 'PaymentRefused: limit reached' },
      { label: 'string', value: () => 'card declined', described: 'string: card declined' },
      {
        label: 'object',
        value: () => ({ code: 'E42', reason: 'card declined' }),
        described: 'Object: {"code":"E42","reason":"card declined"}',
      },
      { label: 'rpc', value: () => new RpcException('card declined by issuer'), described: 'RpcException: card declined by issuer' },
    ];
    for (const c of cases) {
      app.settled.length = 0;
      app.recorder.behavior = () => {
        // A string and a plain object are thrown as they are: what a handler may do.
        throw c.value();
      };
      const { settled, letter } = await deadLetterOf(app);
      expect(letter.error, c.label).toBe(`handler failed on delivery 2 of 2: ${c.described}`);
      if (typeof c.value() === 'string') expect(settled[1]!.error, c.label).toBe('card declined');
      else expect((settled[1]!.error as object).constructor, c.label).toBe((c.value() as object).constructor);
      await redis.client().del(deadLetterKey(app.key()));
    }
  });

  it('the stack beside the log line is escaped like the line: a message quoting the entry cannot forge log lines', async () => {
    const { app, logs } = await startWithLogs();
    app.recorder.behavior = () => {
      throw new Error('cannot ship \x1b[2J\n    at forged (evil.js:1:1)');
    };
    await redis.client().xadd(app.key(), '*', 'order_id', '7');
    await waitFor(() => app.settled.length >= 1, { message: 'the first failure' });
    const [record] = logs.records('RedisStreamsServer').filter((r) => r.line.includes('cannot ship'));
    expect(record!.line).toContain('Error: cannot ship \\x1b[2J\\x0a    at forged (evil.js:1:1); left pending, next try once idle');
    const [head, ...frames] = record!.stack!.split('\n');
    expect(head).toBe('Error: cannot ship \\x1b[2J\\x0a    at forged (evil.js:1:1)');
    expect(frames.length).toBeGreaterThan(0);
    for (const frame of frames) expect(frame).toMatch(/^\s+at (?!forged)/);
  });

  it("a user's exception filter is honoured: its own error is what the transport reports; one delegating to Nest's default keeps the original", async () => {
    const { app } = await startWithLogs({ controllers: [Filtered] });
    const mapped = await deadLetterOf(app, 'mapped');
    expect(mapped.letter.error).toBe('handler failed on delivery 2 of 2: MappedByFilter: mapped: gateway timeout');
    expect(mapped.settled[1]!.error).toBeInstanceOf(MappedByFilter);
    app.settled.length = 0;
    const delegated = await deadLetterOf(app, 'delegated');
    expect(delegated.letter.error).toBe('handler failed on delivery 2 of 2: CardDeclined: card 4242 declined');
    expect(delegated.settled[1]!.error).toBeInstanceOf(CardDeclined);
  });

  it('a batch handler that throws: every entry of the call is dead-lettered with the class and message, the batch log line has the stack', async () => {
    const Ctl = batchController('bulk', { batch: { maxSize: 3, maxWaitMs: 5_000 } });
    const { app, logs } = await startWithLogs({ controllers: [Ctl], providers: [BatchLog] });
    app.app.get(BatchLog).behavior = () => {
      throw new CardDeclined('bulk insert failed: deadlock');
    };
    const ids = await addOrders(redis, app.key('bulk'), 3);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 3, { message: 'three dead letters' });
    // The order of the dead letters is not promised: the second delivery may reach the batch in two reclaims.
    const letters = await deadLetters(app.key('bulk'));
    expect(letters.map((d) => [d.sourceId, d.error]).sort()).toEqual(
      ids.map((id) => [id, 'handler failed on delivery 2 of 2: CardDeclined: bulk insert failed: deadlock']).sort(),
    );
    expect(app.settled.every((e) => e.error instanceof CardDeclined)).toBe(true);
    const [batchLine] = logs.records('RedisStreamsServer').filter((r) => r.line.includes('batch handler for'));
    expect(batchLine!.line).toMatch(
      /failed on 3 of 3 entries .*: CardDeclined: bulk insert failed: deadlock; left pending, next try once idle \d+ ms \(minIdleMs − leaseRenewMs: no retry policy\)$/,
    );
    expect(batchLine!.stack).toMatch(/^CardDeclined: bulk insert failed: deadlock\n\s+at /);
  });

  it('a batch failing on its last delivery: the dead letters, and one batch line with the stack', async () => {
    const Ctl = batchController('bulk', { batch: { maxSize: 3, maxWaitMs: 5_000 } });
    const logs = captureLogs();
    const app = await start(
      { connection: redis.connection, group: 'g', consumer: 'c', keyPrefix: uniquePrefix(), blockMs: 50, minIdleMs: 200, maxDeliveries: 1 },
      { controllers: [Ctl], providers: [BatchLog], logger: logs.logger } as Parameters<typeof start>[1],
    );
    app.app.get(BatchLog).behavior = () => {
      throw new TypeError('cannot read properties of undefined');
    };
    await addOrders(redis, app.key('bulk'), 3);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 3, { message: 'three dead letters' });
    const batchLines = logs.records('RedisStreamsServer').filter((r) => r.line.includes('batch handler for'));
    expect(batchLines.map((r) => r.line)).toEqual([
      expect.stringMatching(/failed on 3 of 3 entries .*: TypeError: cannot read properties of undefined; 3 dead-lettered$/),
    ]);
    expect(batchLines[0]!.stack).toMatch(/^TypeError: cannot read properties of undefined\n\s+at /);
  });

  it('a huge message is cut in the dead letter and the log, saying how much was left out', async () => {
    const { app, logs } = await startWithLogs();
    app.recorder.behavior = () => {
      throw new Error(`card declined ${'x'.repeat(100_000)}`);
    };
    const { letter } = await deadLetterOf(app);
    expect(letter.error.length).toBeLessThan(8400);
    expect(letter.error).toMatch(/^handler failed on delivery 2 of 2: Error: card declined x+… \(\d+ more characters\)$/);
    for (const r of logs.records('RedisStreamsServer').filter((rec) => rec.line.includes('card declined'))) {
      expect(r.line.length).toBeLessThan(8600);
      expect(r.stack!.length).toBeLessThan(20_000);
    }
  });

  it("a request's error reply keeps Nest's wire shape: the caller gets what Nest's other transports send", async () => {
    const { app } = await startWithLogs({ controllers: [RequestsController] });
    app.recorder.behavior = () => {
      throw new Error('boom: card declined');
    };
    const { client } = await producer({ connection: redis.connection, keyPrefix: app.key('') });
    await expect(lastValueFrom(client.send('quote', { n: 1 }))).rejects.toEqual({ status: 'error', message: 'Internal server error' });
  });

  /** A subclass adding its own step to Nest's logging (a metric), then Nest's: Nest's line is still the one that throws. */
  class CountingFilter extends BaseRpcExceptionFilter {
    override handleUnknownError(exception: unknown, status: string) {
      return super.handleUnknownError(exception, status);
    }
  }
  @Controller()
  class CountedRequests {
    constructor(private readonly recorder: Recorder) {}
    @MessagePattern('quote', REDIS_STREAMS_TRANSPORT)
    @UseFilters(CountingFilter)
    quote(@Payload() payload: unknown, @Ctx() ctx: RedisStreamsContext): unknown {
      return this.recorder.handle(payload, ctx);
    }
  }
  /** `error` with a getter for `property` that throws. */
  const unreadable = (error: Error, property: 'message' | 'stack') =>
    Object.defineProperty(error, property, {
      get() {
        throw new Error(`no ${property} here`);
      },
    });
  const failures = {
    'a plain Error': { controller: RequestsController, error: () => new Error('boom: card declined'), line: /boom: card declined/ },
    'an Error whose message getter throws': {
      controller: RequestsController,
      error: () => unreadable(new Error('x'), 'message'),
      line: /its line: \[RpcExceptionsHandler\] /,
    },
    'an Error whose stack getter throws': {
      controller: RequestsController,
      error: () => unreadable(new Error('boom: card declined'), 'stack'),
      line: /boom: card declined/,
    },
    'an ioredis error whose command carries a password, and a logger that quotes it (review-b)': {
      controller: RequestsController,
      error: () =>
        Object.assign(new Error('WRONGPASS invalid username-password pair'), { command: { name: 'auth', args: ['app', 'Hunter2Pass'] } }),
      line: /WRONGPASS/,
    },
    "a subclass's handleUnknownError that calls Nest's": {
      controller: CountedRequests,
      error: () => new Error('boom: card declined'),
      line: /boom: card declined/,
    },
  };
  it.each(Object.keys(failures) as (keyof typeof failures)[])(
    "an app logger that throws on Nest's line for a failed request (%s): the caller still gets Nest's reply, the line goes to stderr (review-z F2)",
    async (name) => {
      const failure = failures[name];
      const logs = captureLogs();
      const logger = {
        ...logs.logger,
        error: (message: unknown, ...rest: unknown[]) => {
          // Some sinks quote what they were given: an ioredis error's command with it.
          const quoted = (message as { command?: unknown } | undefined)?.command;
          if (rest.at(-1) === 'RpcExceptionsHandler') throw new Error(`log sink down${quoted ? `: ${JSON.stringify(quoted)}` : ''}`);
          logs.logger.error(message, ...rest);
        },
      };
      const written: string[] = [];
      const write = process.stderr.write.bind(process.stderr);
      vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
        written.push(String(chunk));
        return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
      });
      try {
        const app = await start(
          {
            connection: redis.connection,
            group: 'g',
            consumer: 'c',
            keyPrefix: uniquePrefix(),
            blockMs: 50,
            minIdleMs: 200,
            maxDeliveries: 2,
          },
          { controllers: [failure.controller], logger } as Parameters<typeof start>[1],
        );
        app.recorder.behavior = () => {
          throw failure.error();
        };
        // Nest's logger is global: the producer's app sets it too.
        const { client } = await producer({ connection: redis.connection, keyPrefix: app.key('') }, logger);
        await expect(lastValueFrom(client.send('quote', { n: 1 }))).rejects.toEqual({ status: 'error', message: 'Internal server error' });
        // Nest's line is not lost: it goes to stderr with what the logger threw.
        const lost = written.filter((w) => w.includes('the logger threw'));
        expect(lost).toEqual([
          expect.stringMatching(/^\[nestjs-redis-streams\] the logger threw \(log sink down.*\); its line: \[RpcExceptionsHandler\] /),
        ]);
        expect(lost[0]).not.toContain('Hunter2Pass');
        expect(lost[0]).toMatch(failure.line);
        // Acked: the request is answered once, not retried.
        await waitFor(async () => (await redis.client().xpending(app.key('quote'), 'g'))[0] === 0, { message: 'the request acked' });
      } finally {
        vi.restoreAllMocks();
      }
    },
  );
});
