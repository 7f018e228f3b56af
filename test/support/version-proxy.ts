import { redisProxy } from './redis-proxy.js';

/**
 * A loopback TCP proxy to a real redis-server that changes only what `INFO` says its version
 * is (`redis_version:<real>` → `redis_version:<fake>`, same length so RESP lengths hold). Every
 * command is still answered by Redis; the test sees how the transport treats an older server.
 */
export async function versionProxy(
  target: { port: number },
  realVersion: string,
  fakeVersion: string,
): Promise<{ port: number; close(): Promise<void> }> {
  if (realVersion.length !== fakeVersion.length) throw new Error("fake version must have the real one's length");
  const from = Buffer.from(`redis_version:${realVersion}`);
  const to = Buffer.from(`redis_version:${fakeVersion}`);
  // An INFO reply is a few hundred bytes: on loopback it arrives in one chunk.
  return redisProxy(target, (data) => {
    for (let at = data.indexOf(from); at !== -1; at = data.indexOf(from, at + to.length)) to.copy(data, at);
  });
}
