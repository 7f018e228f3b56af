import { CLIENT_DEFAULTS, InvalidOptionError, RedisStreamsClient, RedisStreamsServer, SERVER_DEFAULTS } from 'nestjs-redis-streams';
import { hostname } from 'node:os';

describe('options', () => {
  it.each([
    [{ batchSize: 0 }, 'batchSize'],
    [{ batchSize: 2.5 }, 'batchSize'],
    [{ blockMs: -1 }, 'blockMs'],
    [{ blockMs: '100' }, 'blockMs'],
    [{ minIdleMs: 0 }, 'minIdleMs'],
    [{ minIdleMs: 300, leaseRenewMs: 300 }, 'leaseRenewMs'],
    [{ group: '' }, 'group'],
    [{ consumer: '  ' }, 'consumer'],
    [{ groupStartId: '>' }, 'groupStartId'],
    [{ readAhead: 'yes' }, 'readAhead'],
    [{ commandTimeoutMs: 0 }, 'commandTimeoutMs'],
    [{ keyPrefix: 5 }, 'keyPrefix'],
    [{ retryInitialDelayMs: 500, retryMaxDelayMs: 100 }, 'retryMaxDelayMs'],
    [{ connection: 'http://127.0.0.1:6379' }, 'connection'],
    [{ connection: 'not a url' }, 'connection'],
    [{ connection: { keyPrefix: 'x:' } }, 'connection.keyPrefix'],
    [{ minIdle: 100 }, 'minIdle'],
  ])('rejects %j at construction, naming "%s"', (options, option) => {
    const make = () => new RedisStreamsServer(options as never);
    expect(make).toThrow(InvalidOptionError);
    expect(make).toThrow(`invalid option "${option}"`);
  });

  it('fills in the documented defaults', () => {
    const { options } = new RedisStreamsServer();
    expect(options).toMatchObject({ ...SERVER_DEFAULTS, leaseRenewMs: 10_000, consumer: `${hostname()}-${process.pid}` });
    expect(options.connection).toEqual({ host: '127.0.0.1', port: 6379 });
  });

  it('parses a redis:// URL with credentials and database', () => {
    const { options } = new RedisStreamsServer({ connection: 'redis://user:p%40ss@[::1]:6380/3' });
    expect(options.connection).toEqual({ host: '::1', port: 6380, db: 3, username: 'user', password: 'p@ss' });
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
  ])('rejects %j at construction, naming "%s"', (options, option) => {
    expect(() => new RedisStreamsClient(options as never)).toThrow(`invalid option "${option}"`);
  });

  it('fills in the documented defaults', () => {
    const { options } = new RedisStreamsClient();
    expect(options).toMatchObject({ ...CLIENT_DEFAULTS, retention: undefined, streamRetention: {} });
  });
});
