import { maskUrl, RedisStreamsServer } from 'nestjs-redis-streams';

// A mistyped URL is where a password leaks first: it is printed back to say what is wrong with it.
describe('maskUrl and mistyped URLs', () => {
  const secret = 'Wrong9Secret';
  it.each([
    ['redis://alice:Wrong9Secret@127.0.0.1:6379', 'redis://alice:***@127.0.0.1:6379'],
    ['redis:/alice:Wrong9Secret@127.0.0.1:6379', 'redis:/alice:***@127.0.0.1:6379'],
    ['redis//alice:Wrong9Secret@127.0.0.1:6379', 'redis//alice:***@127.0.0.1:6379'],
    ['redis://:Wrong9Secret@127.0.0.1', 'redis://:***@127.0.0.1'],
  ])('masks %s', (url, masked) => {
    expect(maskUrl(url)).toBe(masked);
    expect(maskUrl(`cannot reach Redis at ${url}`)).not.toContain(secret);
  });

  it.each([
    'redis:/alice:Wrong9Secret@127.0.0.1:6379',
    'redis:alice:Wrong9Secret@127.0.0.1:6379',
    'redis//alice:Wrong9Secret@127.0.0.1:6379',
  ])('refuses %s without printing its password', (url) => {
    let message = '';
    try {
      new RedisStreamsServer({ connection: url });
    } catch (err) {
      message = String(err);
    }
    expect(message).toMatch(/connection/);
    expect(message).not.toContain(secret);
  });
});
