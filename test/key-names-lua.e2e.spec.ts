import {
  derivedKey,
  idempotencyKeyPrefixOf,
  isOwnIdempotencyKey,
  KEY_KINDS,
  LUA_OWN_IDEMPOTENCY_KEY,
  type KeyKind,
} from '../libs/redis-streams/src/key-names.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();

/** What the delayed scripts accept as a record's idempotency key (Lua) is what key-names.ts accepts (TypeScript). */
describe('the delayed scripts take an idempotency record of their own stream only, as key-names.ts says', () => {
  it('Lua and TypeScript agree, on one node and cluster names, for every kind of key', async () => {
    const names = ['orders', 'orders:idmp:p', '{orders}', 'jobs:42', 'a}b', 'app:{orders:3}'];
    const parts = ['g', 'dead', 'b:retry:c', '7', ''];
    const keys: string[] = [];
    for (const onCluster of [false, true])
      for (const [kind, { parts: n }] of Object.entries(KEY_KINDS) as [KeyKind, { parts: number }][])
        for (const name of names)
          for (const a of parts)
            keys.push(derivedKey(kind, name, n === 0 ? [] : n === 1 ? [a] : [a, parts[(parts.indexOf(a) + 1) % parts.length]!], onCluster));
    const prefixes = [...new Set([false, true].flatMap((c) => names.map((name) => idempotencyKeyPrefixOf(name, c))))];
    const script = `${LUA_OWN_IDEMPOTENCY_KEY}
local out = {}
for i = 2, #ARGV do out[#out + 1] = ownIdempotencyKey(ARGV[1], ARGV[i]) and 1 or 0 end
return out`;
    let accepted = 0;
    for (const prefix of prefixes) {
      const lua = (await redis.client().eval(script, 0, prefix, ...keys)) as number[];
      const ts = keys.map((key) => (isOwnIdempotencyKey(prefix, key) ? 1 : 0));
      expect(lua, prefix).toEqual(ts);
      accepted += ts.filter(Boolean).length;
    }
    // Each stream's own records were among them.
    expect(accepted).toBeGreaterThan(0);
  });
});
