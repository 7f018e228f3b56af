// Apart from redis-server.ts: the bench imports that one, outside Vitest (no beforeAll there).
import { startRedis, type TestRedis } from './redis-server.js';

/**
 * The file's server, started before its tests and stopped after them (`beforeAll` / `afterAll`):
 * `const redis = useRedis();` at the top of a test file. Read it inside tests and hooks only.
 */
export function useRedis(options?: Parameters<typeof startRedis>[0]): TestRedis {
  let handle: TestRedis | undefined;
  beforeAll(async () => {
    handle = await startRedis(options);
  });
  afterAll(async () => handle?.stop());
  return new Proxy({} as TestRedis, {
    get(_, key) {
      if (!handle) throw new Error('useRedis(): the server is started in beforeAll; read it inside a test or hook');
      const value: unknown = Reflect.get(handle, key);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(handle) : value;
    },
  });
}
