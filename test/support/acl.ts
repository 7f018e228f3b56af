import type { Redis } from 'ioredis';

/** The least a consumer (server) needs; README "Minimal ACL". */
export const CONSUMER_ACL =
  '+hello +client|setname +client|id +client|unblock +info +ping +select +quit +xgroup|create +xreadgroup +xautoclaim +xpending +xack +xclaim +xinfo|stream +xadd +pexpire +multi +exec +evalsha +eval';
/** The least a producer (client) needs; README "Minimal ACL". */
export const PRODUCER_ACL =
  '+hello +client|setname +client|id +client|unblock +info +ping +select +quit +xadd +xread +xdel +pexpire +del +multi +exec +evalsha +eval +xlen +xrange +xinfo|groups +xpending +xtrim';

/** Creates (or resets) an ACL user limited to keys under `prefix`; returns ioredis options for it. */
export async function aclUser(admin: Redis, port: number, name: string, prefix: string, rules: string): Promise<{ host: string; port: number; username: string; password: string }> {
  await admin.call('ACL', 'SETUSER', name, 'reset', 'on', '>pw', `~${prefix}*`, ...rules.split(' '));
  return { host: '127.0.0.1', port, username: name, password: 'pw' };
}
