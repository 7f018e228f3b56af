import { readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';

// The guide's "Minimal ACL" page (docs/guide/security.md).
const readme = readFileSync(new URL('../../docs/guide/security.md', import.meta.url), 'utf8');

/** The rules of the README's `ACL SETUSER <user> …` line (section "Minimal ACL"), selectors kept whole. */
function readmeAcl(user: string): string[] {
  const line = readme.split('\n').find((l) => l.startsWith(`ACL SETUSER ${user} `));
  if (!line) throw new Error(`docs/guide/security.md has no "ACL SETUSER ${user}" line`);
  return line.slice(`ACL SETUSER ${user} `.length).match(/\([^)]*\)|\S+/g)!;
}

/** The consumer's (RedisStreamsServer) rules, exactly as README "Minimal ACL" documents them (keys under `app:`). */
export const CONSUMER_ACL: readonly string[] = readmeAcl('orders-worker');
/** The producer's (RedisStreamsClient) rules, as README "Minimal ACL" documents them. */
export const PRODUCER_ACL: readonly string[] = readmeAcl('orders-api');
/** An operator's rules for `redis-streams pause|resume <stream>`, as the guide documents them. */
export const PAUSE_ACL: readonly string[] = readmeAcl('orders-ops');

/**
 * Creates (or resets) an ACL user with `rules` (README's `app:` key prefix replaced by `prefix`,
 * its password by `pw`); returns ioredis options for it.
 */
export async function aclUser(
  admin: Redis,
  port: number,
  name: string,
  prefix: string,
  rules: readonly string[],
): Promise<{ host: string; port: number; username: string; password: string }> {
  const mine = rules.map((r) => (r.startsWith('>') ? '>pw' : r.replaceAll('app:', prefix)));
  await admin.call('ACL', 'SETUSER', name, 'reset', ...mine);
  return { host: '127.0.0.1', port, username: name, password: 'pw' };
}
