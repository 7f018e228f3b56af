import {
  InvalidOptionError,
  JsonDeserializer,
  JsonSerializer,
  MAX_BATCH_SIZE,
  RedisStreamsClient,
  RedisStreamsRecord,
  RedisStreamsServer,
} from 'nestjs-redis-streams';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

// The options tables live in docs/guide/options.md (README links there).
const readme = readFileSync(new URL('../docs/guide/options.md', import.meta.url), 'utf8');

/** The README table whose header row is `header`: option name → its "default" cell. */
function readmeDefaults(header: string): Map<string, string> {
  const lines = readme.split('\n');
  const start = lines.indexOf(header);
  if (start === -1) throw new Error(`docs/guide/options.md has no table headed ${header}`);
  const rows = new Map<string, string>();
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const [, name, value] = /^\| `([^`]+)` \| (.*?) \| /.exec(line)!;
    rows.set(name!, value!);
  }
  return rows;
}

/** What a README default cell means, checked against the resolved option. */
function matchesDoc(cell: string, actual: unknown, resolved: Record<string, unknown>): boolean {
  if (cell === 'none') return actual === undefined;
  if (cell === 'JSON') return actual instanceof JsonSerializer || actual instanceof JsonDeserializer;
  if (cell === '`redis://127.0.0.1:6379`') return JSON.stringify(actual) === JSON.stringify({ host: '127.0.0.1', port: 6379 });
  if (cell === '`<hostname>-<pid>`') return actual === `${hostname()}-${process.pid}`;
  if (cell === '`minIdleMs / 3`') return actual === Math.floor((resolved.minIdleMs as number) / 3);
  if (cell === '`` s => `${s}:dead` ``') return typeof actual === 'function' && actual('orders') === 'orders:dead';
  const literal = /^`(.*)`$/.exec(cell)?.[1];
  if (literal === undefined) throw new Error(`cannot read the README default ${cell}`);
  return JSON.stringify(actual) === JSON.stringify(JSON.parse(literal.replaceAll("'", '"')));
}

describe('options', () => {
  it.each([
    [{ batchSize: 0 }, 'batchSize'],
    [{ batchSize: 2.5 }, 'batchSize'],
    [{ blockMs: -1 }, 'blockMs'],
    [{ blockMs: '100' }, 'blockMs'],
    // Past a day the park's watchdog timer would overflow Node's timer range and fire at once.
    [{ blockMs: 2 ** 31 }, 'blockMs'],
    [{ minIdleMs: 0 }, 'minIdleMs'],
    [{ minIdleMs: 300, leaseRenewMs: 300 }, 'leaseRenewMs'],
    [{ group: '' }, 'group'],
    [{ consumer: '  ' }, 'consumer'],
    [{ groupStartId: '>' }, 'groupStartId'],
    [{ readAhead: 'yes' }, 'readAhead'],
    [{ newerCommands: 'no' }, 'newerCommands'],
    [{ deleteOnAck: true }, 'deleteOnAck'],
    [{ deleteOnAck: 'KEEPREF' }, 'deleteOnAck'],
    [{ deadLetterRetention: {} }, 'deadLetterRetention'],
    [{ deadLetterRetention: { maxLen: 0 } }, 'deadLetterRetention.maxLen'],
    [{ deadLetterRetention: { maxLen: 10, maxAgeMs: 60_000 } }, 'deadLetterRetention'],
    [{ deadLetterRetention: { maxlen: 10 } }, 'deadLetterRetention.maxlen'],
    [{ startupTimeoutMs: 0 }, 'startupTimeoutMs'],
    [{ commandTimeoutMs: 0 }, 'commandTimeoutMs'],
    [{ keyPrefix: 5 }, 'keyPrefix'],
    [{ retryInitialDelayMs: 500, retryMaxDelayMs: 100 }, 'retryMaxDelayMs'],
    [{ connection: 'http://127.0.0.1:6379' }, 'connection'],
    [{ connection: 'not a url' }, 'connection'],
    [{ connection: { keyPrefix: 'x:' } }, 'connection.keyPrefix'],
    [{ minIdle: 100 }, 'minIdle'],
    [{ stuckEntryMs: 0 }, 'stuckEntryMs'],
    [{ stuckEntryMs: 2 ** 31 }, 'stuckEntryMs'],
    [{ shutdownTimeoutMs: true }, 'shutdownTimeoutMs'],
    [{ shutdownTimeoutMs: 0 }, 'shutdownTimeoutMs'],
    [{ retry: 5 }, 'retry'],
    [{ retry: { backof: { type: 'fixed', delayMs: 1 } } }, 'retry.backof'],
    [{ retry: {} }, 'retry.backoff'],
    [{ retry: { backoff: { type: 'linear', delayMs: 1 } } }, 'retry.backoff.type'],
    [{ retry: { backoff: { type: 'fixed', delayMs: -1 } } }, 'retry.backoff.delayMs'],
    [{ retry: { backoff: { type: 'fixed', delayMs: '100' } } }, 'retry.backoff.delayMs'],
    [{ retry: { backoff: { type: 'fixed', delayMs: 86_400_001 } } }, 'retry.backoff.delayMs'],
    [{ retry: { backoff: { type: 'exponential', delayMs: 100, maxDelayMs: 50 } } }, 'retry.backoff.maxDelayMs'],
    [{ retry: { backoff: { type: 'fixed', delayMs: 1, jitter: 2 } } }, 'retry.backoff.jitter'],
    [{ retry: { backoff: { type: 'fixed', delayMs: 1, jiter: 0.5 } } }, 'retry.backoff.jiter'],
    [{ maxWaitingRetries: 0 }, 'maxWaitingRetries'],
  ])('rejects %j at construction, naming "%s"', (options, option) => {
    const make = () => new RedisStreamsServer(options as never);
    expect(make).toThrow(InvalidOptionError);
    expect(make).toThrow(`invalid option "${option}"`);
  });

  it('names the option exactly, whatever the value: not an object, a BigInt, an inherited bound', () => {
    const refused = (options: object, option: string, Made: new (options: never) => unknown = RedisStreamsServer) => {
      const make = () => new Made(options as never);
      expect(make).toThrow(InvalidOptionError);
      expect(make).toThrow(`invalid option "${option}":`);
    };
    for (const value of [null, 5, 'maxLen']) refused({ deadLetterRetention: value }, 'deadLetterRetention');
    refused({ retention: null }, 'retention', RedisStreamsClient);
    refused({ retention: { maxLen: 1, maxAgeMs: Object.create(null) } }, 'retention.maxAgeMs', RedisStreamsClient);
    refused({ deadLetterRetention: { maxLen: 10n } }, 'deadLetterRetention.maxLen');
    refused({ minIdleMs: 10n }, 'minIdleMs');
    refused({ deadLetterRetention: Object.create({ maxLen: 5 }) }, 'deadLetterRetention');
  });

  it('fills in the defaults README.md documents, and documents every option', () => {
    const options = new RedisStreamsServer().options as unknown as Record<string, unknown>;
    const documented = readmeDefaults('| option | default | meaning |');
    expect([...documented.keys()].sort()).toEqual(Object.keys(options).sort());
    for (const [name, cell] of documented) expect(matchesDoc(cell, options[name], options), `${name}: README says ${cell}`).toBe(true);
  });

  it('shutdownTimeoutMs: false waits as long as the handlers take (no limit)', () => {
    expect(new RedisStreamsServer({ shutdownTimeoutMs: false }).options.shutdownTimeoutMs).toBeUndefined();
  });

  it(`bounds batchSize at ${MAX_BATCH_SIZE}, as README.md says`, () => {
    expect(new RedisStreamsServer({ batchSize: MAX_BATCH_SIZE }).options.batchSize).toBe(MAX_BATCH_SIZE);
    expect(() => new RedisStreamsServer({ batchSize: MAX_BATCH_SIZE + 1 })).toThrow(
      `invalid option "batchSize": must be at most ${MAX_BATCH_SIZE}`,
    );
    expect(readmeDefaults('| option | default | meaning |').get('batchSize')).toBe('`10`');
    expect(readme).toContain(`at most \`${MAX_BATCH_SIZE}\``);
  });

  it('never echoes a password when it refuses a connection URL', () => {
    for (const connection of [
      'redis://app:s3cret@redis.internal:6379x',
      'redis://:s3cret@127.0.0.1:99999',
      'http://app:s3cret@127.0.0.1:6379',
    ]) {
      const make = () => new RedisStreamsServer({ connection });
      expect(make).toThrow(InvalidOptionError);
      if (connection.startsWith('redis')) expect(make).toThrow(/not a valid URL: ".*:\*\*\*@/);
      expect(make).not.toThrow(/s3cret/);
      expect(() => new RedisStreamsClient({ connection })).not.toThrow(/s3cret/);
    }
  });

  it('parses a redis:// URL with credentials and database', () => {
    const { options } = new RedisStreamsServer({ connection: 'redis://user:p%40ss@[::1]:6380/3' });
    expect(options.connection).toEqual({ host: '::1', port: 6380, db: 3, username: 'user', password: 'p@ss' });
  });

  it('takes a cluster as node URLs (credentials shared) or { cluster, options }, and refuses what a cluster cannot be', () => {
    const urls = new RedisStreamsServer({ connection: ['redis://app:s3cret@127.0.0.1:7000', 'redis://app:s3cret@127.0.0.1:7001'] });
    expect(urls.options.connection).toEqual({
      cluster: [
        { host: '127.0.0.1', port: 7000 },
        { host: '127.0.0.1', port: 7001 },
      ],
      options: { redisOptions: { username: 'app', password: 's3cret' } },
    });
    const nodes = new RedisStreamsServer({
      connection: { cluster: [{ host: '127.0.0.1', port: 7000 }], options: { scaleReads: 'master' } },
    });
    expect(nodes.options.connection).toEqual({ cluster: [{ host: '127.0.0.1', port: 7000 }], options: { scaleReads: 'master' } });
    // The default dead-letter key of an untagged stream shares its slot on a cluster only.
    expect(nodes.options.deadLetterStream && nodes.options.deadLetterStream('orders')).toBe('{orders}:dead');
    expect(nodes.options.deadLetterStream && nodes.options.deadLetterStream('app:{orders:3}')).toBe('app:{orders:3}:dead');
    const single = new RedisStreamsServer({}).options.deadLetterStream;
    expect(single && single('orders')).toBe('orders:dead');
    for (const [connection, option] of [
      [[], 'connection.cluster'],
      [{ cluster: [] }, 'connection.cluster'],
      [['redis://127.0.0.1:7000/2'], 'connection.cluster[0]'],
      [['http://127.0.0.1:7000'], 'connection.cluster[0]'],
      [{ cluster: [{ host: '127.0.0.1', port: 0 }] }, 'connection.cluster[0].port'],
      [{ cluster: [{ port: 7000 }] }, 'connection.cluster[0].host'],
      [{ cluster: [{ host: '127.0.0.1', port: 7000 }], options: { keyPrefix: 'x:' } }, 'connection.options.keyPrefix'],
    ] as const) {
      expect(() => new RedisStreamsServer({ connection: connection as never })).toThrow(
        new RegExp(`invalid option "${option.replace(/[[\].]/g, '\\$&')}"`),
      );
    }
    expect(() => new RedisStreamsServer({ connection: ['redis://app:s3cret@127.0.0.1:7000/1'] })).not.toThrow(/s3cret/);
    expect(() => new RedisStreamsServer({ consumerCleanup: { idleMs: 1000, intervalMs: 2 ** 31 } })).toThrow(
      /invalid option "consumerCleanup.intervalMs"/,
    );
    expect(() => new RedisStreamsServer({ consumerCleanup: { intervalMs: 1000 } as never })).toThrow(
      /invalid option "consumerCleanup.idleMs": is required/,
    );
    expect(() => new RedisStreamsServer({ consumerCleanup: { idleMs: 1000, every: 5 } as never })).toThrow(
      /invalid option "consumerCleanup.every"/,
    );
    // With maxRedirections 0 ioredis reports every error reply (BUSYGROUP, NOGROUP …) as "Too many Cluster redirections".
    expect(
      () => new RedisStreamsServer({ connection: { cluster: [{ host: '127.0.0.1', port: 7000 }], options: { maxRedirections: 0 } } }),
    ).toThrow(/invalid option "connection.options.maxRedirections": must be at least 1/);
    // Seeds of one cluster share credentials and scheme: a mix is refused, never silently reduced to the first seed's.
    expect(() => new RedisStreamsServer({ connection: ['redis://127.0.0.1:7000', 'redis://u:s3cret@127.0.0.1:7001'] })).toThrow(
      /invalid option "connection.cluster\[1\]": .*same credentials and scheme/,
    );
    expect(() => new RedisStreamsServer({ connection: ['redis://127.0.0.1:7000', 'rediss://127.0.0.1:7001'] })).toThrow(
      /invalid option "connection.cluster\[1\]"/,
    );
    expect(
      () => new RedisStreamsServer({ connection: { cluster: [{ host: '127.0.0.1', port: 7000 }], options: { redisOptions: { db: 1 } } } }),
    ).toThrow(/invalid option "connection.options.redisOptions.db": a cluster has only database 0/);
  });
});

describe('client options', () => {
  it.each([
    [{ commandTimeoutMs: 0 }, 'commandTimeoutMs'],
    [{ replyBlockMs: 1000, replyTtlMs: 1000 }, 'replyTtlMs'],
    [{ retention: {} }, 'retention'],
    [{ retention: { maxLen: -5 } }, 'retention.maxLen'],
    [{ retention: { maxLen: 10, keep: true } }, 'retention.keep'],
    [{ streamRetention: { orders: { safe: 'yes', maxLen: 1 } } }, 'streamRetention.orders.safe'],
    [{ serializer: JSON }, 'serializer'],
    [{ timeout: 5 }, 'timeout'],
    [{ partitions: { orders: 0 } }, 'partitions.orders'],
    [{ partitions: { orders: 65 } }, 'partitions.orders'],
    [{ partitions: 6 }, 'partitions'],
    [{ partitionKey: 'customer' }, 'partitionKey'],
    [{ producerId: '' }, 'producerId'],
    [{ producerId: 'orders:api' }, 'producerId'],
    [{ idempotency: 600 }, 'idempotency'],
    [{ idempotency: { windowSec: 0 } }, 'idempotency.windowSec'],
    [{ idempotency: { windowSec: 86_401 } }, 'idempotency.windowSec'],
    [{ idempotency: { maxKeys: 10_001 } }, 'idempotency.maxKeys'],
    [{ idempotency: { window: 600 } }, 'idempotency.window'],
    [{ newerCommands: 'no' }, 'newerCommands'],
  ])('rejects %j at construction, naming "%s"', (options, option) => {
    expect(() => new RedisStreamsClient(options as never)).toThrow(`invalid option "${option}"`);
  });

  it('refuses a record whose idempotencyKey is empty or not a string, naming it', () => {
    expect(() => new RedisStreamsRecord({}, {}, { idempotencyKey: '' })).toThrow('idempotencyKey must be a non-empty string');
    expect(() => new RedisStreamsRecord({}, {}, { idempotencyKey: 7 as never })).toThrow(
      'idempotencyKey must be a non-empty string, got number',
    );
  });

  it('fills in the defaults README.md documents, and documents every option', () => {
    const options = new RedisStreamsClient().options as unknown as Record<string, unknown>;
    const documented = readmeDefaults('| client option | default | meaning |');
    expect([...documented.keys()].sort()).toEqual(Object.keys(options).sort());
    for (const [name, cell] of documented) expect(matchesDoc(cell, options[name], options), `${name}: README says ${cell}`).toBe(true);
  });
});
