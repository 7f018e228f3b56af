import { createServer, connect, type Server, type Socket } from 'node:net';

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
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, '127.0.0.1');
    sockets.add(client).add(upstream);
    client.pipe(upstream);
    // An INFO reply is a few hundred bytes: on loopback it arrives in one chunk.
    upstream.on('data', (data: Buffer) => {
      for (let at = data.indexOf(from); at !== -1; at = data.indexOf(from, at + to.length)) to.copy(data, at);
      client.write(data);
    });
    upstream.on('end', () => client.end());
    for (const s of [client, upstream]) s.on('error', () => s.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
