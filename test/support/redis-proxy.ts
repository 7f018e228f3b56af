import { createServer, connect, type Server, type Socket } from 'node:net';

export interface RedisProxy {
  port: number;
  /**
   * From the first request chunk (on any one connection) whose text `start` accepts, that
   * connection's requests are held back, not sent to Redis, until `release()`.
   */
  holdRequestsFrom(start: (text: string) => boolean): void;
  /** How many times `pattern` (global) occurs in the requests held now. */
  heldMatching(pattern: RegExp): number;
  /** Sends the held requests to Redis in one write: Redis runs them in order and answers them in one write. */
  release(): void;
  /**
   * From now on, Redis' replies on the connections whose last request `last` accepts (a parked XREADGROUP … BLOCK)
   * are held back, not sent to the client, until `releaseReplies()`: Redis ran the command, its answer is late.
   */
  holdRepliesOf(last: (text: string) => boolean): number;
  /** Sends the held replies on to their clients. */
  releaseReplies(): void;
  close(): Promise<void>;
}

/**
 * A loopback TCP proxy to a real redis-server. Every command is still answered by Redis;
 * `rewrite` may change the bytes of what Redis sends (lengths kept), and a hold (see
 * RedisProxy) makes chosen commands reach Redis together, so their replies reach the client
 * together: what a loaded client sees when it reads late.
 */
export async function redisProxy(target: { port: number }, rewrite?: (data: Buffer) => void): Promise<RedisProxy> {
  const sockets = new Set<Socket>();
  let start: ((text: string) => boolean) | undefined;
  let hold: { upstream: Socket; chunks: Buffer[] } | undefined;
  /** Per client connection: its last request, and its replies held back (see holdRepliesOf). */
  const links = new Map<Socket, { last: string; replies: Buffer[] | undefined }>();
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, '127.0.0.1');
    sockets.add(client).add(upstream);
    const link = { last: '', replies: undefined as Buffer[] | undefined };
    links.set(client, link);
    client.on('data', (data: Buffer) => {
      link.last = data.toString('latin1');
      if (!hold && start?.(data.toString('latin1'))) {
        hold = { upstream, chunks: [] };
        start = undefined;
      }
      if (hold?.upstream === upstream) hold.chunks.push(data);
      else upstream.write(data);
    });
    upstream.on('data', (data: Buffer) => {
      rewrite?.(data);
      if (link.replies) link.replies.push(data);
      else client.write(data);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    for (const s of [client, upstream]) s.on('error', () => s.destroy());
    client.on('close', () => (upstream.destroy(), links.delete(client)));
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    holdRequestsFrom: (accept) => (start = accept),
    heldMatching: (pattern) => (hold ? (Buffer.concat(hold.chunks).toString('latin1').match(pattern)?.length ?? 0) : 0),
    release: () => {
      if (!hold) return;
      hold.upstream.write(Buffer.concat(hold.chunks));
      hold = undefined;
    },
    holdRepliesOf: (last) => {
      let held = 0;
      for (const link of links.values()) {
        if (link.replies || !last(link.last)) continue;
        link.replies = [];
        held++;
      }
      return held;
    },
    releaseReplies: () => {
      for (const [client, link] of links) {
        if (link.replies) client.write(Buffer.concat(link.replies));
        link.replies = undefined;
      }
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
