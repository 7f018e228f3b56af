// The library's logger guard (libs/redis-streams/src/guarded-logger.ts): a logger's failure never reaches the
// step that logged. The loop's side is test/retry-kinds.e2e.spec.ts' "a logger that throws".
import { guardLog, guardLogger } from '../libs/redis-streams/src/guarded-logger.js';
import { stepFailed } from '../libs/redis-streams/src/telemetry/safely.js';
import type { OtelApi } from '../libs/redis-streams/src/telemetry/otel-api.js';
import { waitFor } from './support/wait-for.js';

describe('guardLogger', () => {
  let written: string[];
  beforeEach(() => {
    written = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    });
  });
  afterEach(() => vi.restoreAllMocks());

  it('passes each line on as it was called: error without a stack gets one argument, as Nest prints an explicit undefined', () => {
    const calls: unknown[][] = [];
    const logger = guardLogger({
      log: (...a: unknown[]) => calls.push(['log', ...a]),
      warn: (...a: unknown[]) => calls.push(['warn', ...a]),
      error: (...a: unknown[]) => calls.push(['error', ...a]),
    });
    logger.log('a');
    logger.warn('b');
    logger.error('c');
    logger.error('d', 'stack');
    expect(calls).toEqual([
      ['log', 'a'],
      ['warn', 'b'],
      ['error', 'c'],
      ['error', 'd', 'stack'],
    ]);
    expect(written).toEqual([]);
  });

  it('a logger that throws: the line goes to stderr with what it threw, and the caller goes on', () => {
    const logger = guardLogger({
      log: () => {
        throw new Error('sink full');
      },
      warn: () => {
        throw 'not an Error';
      },
      error: () => {
        throw new Error('sink gone');
      },
    });
    expect(() => {
      logger.log('one');
      logger.warn('two');
      logger.error('three', 'at handler');
    }).not.toThrow();
    expect(written).toEqual([
      '[nestjs-redis-streams] the logger threw (sink full); its line: one\n',
      '[nestjs-redis-streams] the logger threw (not an Error); its line: two\n',
      '[nestjs-redis-streams] the logger threw (sink gone); its line: three\nat handler\n',
    ]);
  });

  it('whatever the logger throws, its line is printed, control characters escaped (review-x)', () => {
    const unprintable = new Error('x');
    Object.defineProperty(unprintable, 'message', {
      get() {
        throw new Error('no message');
      },
    });
    const throws = [Object.create(null), unprintable, new Error('sink said: \x1b[2J\n[nestjs-redis-streams] forged')];
    const logger = guardLogger({
      log: () => {
        throw throws.shift();
      },
      warn: () => {},
      error: () => {},
    });
    logger.log('one');
    logger.log('two');
    logger.log('three');
    expect(written).toEqual([
      '[nestjs-redis-streams] the logger threw ({}); its line: one\n',
      '[nestjs-redis-streams] the logger threw ((unprintable)); its line: two\n',
      '[nestjs-redis-streams] the logger threw (sink said: \\x1b[2J\\x0a[nestjs-redis-streams] forged); its line: three\n',
    ]);
  });

  it('a guarded logger guarded again is the same logger (the host and the engine each guard theirs)', () => {
    const logger = guardLogger({ log: () => {}, warn: () => {}, error: () => {} });
    expect(guardLogger(logger)).toBe(logger);
  });

  it("a one-method logger (the dashboard's audit log) is guarded alike", () => {
    const logger = guardLog({
      log: () => {
        throw new Error('audit sink down');
      },
    });
    expect(() => logger.log('dashboard: "ops" paused')).not.toThrow();
    expect(written).toEqual(['[nestjs-redis-streams] the logger threw (audit sink down); its line: dashboard: "ops" paused\n']);
  });

  it("OpenTelemetry's diag logger that throws: a step's failure is still carried no further (review-y)", () => {
    // The API does not guard its diag logger: before, this throw left safely() and failed the emit it was part of.
    const api = {
      diag: {
        warn: () => {
          throw new Error('diag sink down');
        },
      },
    } as unknown as OtelApi;
    const step = `span end ${Math.random()}`;
    expect(() => stepFailed(api, step, new Error('exporter broken'))).not.toThrow();
    expect(written).toEqual([
      `[nestjs-redis-streams] the logger threw (diag sink down); its line: nestjs-redis-streams: OpenTelemetry ${step} failed, carrying on without it: exporter broken\n`,
    ]);
  });

  it('an SDK step that throws a value nothing can describe: still carried no further (review-z)', () => {
    const hostile = new Error('x');
    Object.defineProperty(hostile, 'message', {
      get() {
        throw new Error('message getter');
      },
    });
    const warned: string[] = [];
    const api = { diag: { warn: (line: string) => warned.push(line) } } as unknown as OtelApi;
    const step = `span start ${Math.random()}`;
    // Before: describeError threw out of stepFailed, and so out of safely(): an emit failed, a loop restarted.
    expect(() => stepFailed(api, step, hostile)).not.toThrow();
    expect(warned).toEqual([
      `nestjs-redis-streams: OpenTelemetry ${step} failed, carrying on without it (its error could not be described)`,
    ]);
  });

  it('a logger whose promise rejects (an async sink): the line goes to stderr, no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const logger = guardLogger({
        log: () => Promise.reject(new Error('remote down')),
        warn: () => Promise.resolve(),
        error: () => Promise.reject(new Error('remote down')),
      });
      logger.log('one');
      logger.warn('two');
      logger.error('three');
      await waitFor(() => written.length === 2, { message: 'both lines on stderr' });
      // One more turn of the event loop: an unhandled rejection is reported after the microtasks.
      await new Promise((resolve) => setImmediate(resolve));
      expect(written).toEqual([
        '[nestjs-redis-streams] the logger threw (remote down); its line: one\n',
        '[nestjs-redis-streams] the logger threw (remote down); its line: three\n',
      ]);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it("what the logger threw is masked and bounded as the library's own lines are: it may quote what it was given (review-a F2)", () => {
    const logger = guardLogger({
      log: (message: string) => {
        throw new Error(`sink refused: ${message} redis://app:S3cretPW@127.0.0.1:6379 ${'H'.repeat(1_000_000)}`);
      },
      warn: () => undefined,
      error: () => undefined,
    });
    logger.log('one');
    expect(written).toHaveLength(1);
    expect(written[0]).not.toContain('S3cretPW');
    expect(written[0]).toContain('redis://app:***@127.0.0.1:6379');
    expect(written[0]!.length).toBeLessThan(10_000);
    expect(written[0]).toMatch(/more characters\)\); its line: one\n$/);
  });

  it('a logger that returns a thenable whose `then` throws when called: the line may be lost, so it goes to stderr', () => {
    const logger = guardLogger({
      log: () => ({
        then() {
          throw new Error('broken thenable');
        },
      }),
      warn: () => undefined,
      error: () => undefined,
    });
    expect(() => logger.log('one')).not.toThrow();
    expect(written).toEqual(['[nestjs-redis-streams] the logger threw (broken thenable); its line: one\n']);
  });

  it('a logger that returns a value whose `then` cannot be read: the line was taken, nothing goes to stderr (review-z)', () => {
    const taken: string[] = [];
    const answer = (message: string) => {
      taken.push(message);
      return {
        get then(): never {
          throw new Error('no then here');
        },
      };
    };
    const logger = guardLogger({ log: answer, warn: answer, error: answer });
    expect(() => {
      logger.log('one');
      logger.warn('two');
      logger.error('three', 'stack');
    }).not.toThrow();
    expect(taken).toEqual(['one', 'two', 'three']);
    expect(written).toEqual([]);
  });
});
