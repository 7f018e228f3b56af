/**
 * A blocking lane re-pointed (its slot moved, on a cluster) from a ready connection: what its reported state (the
 * status and the log's) says while the new connection comes up, and when it never does.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { firstValueFrom, NEVER } from 'rxjs';
import { BlockingLane } from '../libs/redis-streams/src/redis/connection/blocking-lane.js';
import type { LaneState } from '../libs/redis-streams/src/redis/connection/lane-state.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

/** Every state `lane` reports from now on. */
function record(lane: BlockingLane): { states: LaneState[]; stop: () => void } {
  const states: LaneState[] = [];
  const sub = lane.reportedState$.subscribe((s) => states.push(s));
  return { states, stop: () => sub.unsubscribe() };
}

/** A loopback port that takes connections and never answers (a node frozen after accepting). */
async function silentPort(): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('BlockingLane: a move from a ready connection', () => {
  it('reads as ready while the new connection comes up (a move, not a loss)', async (ctx) => {
    if (redis.cluster) ctx.skip(); // one node: the lane is pointed at it twice
    const lane = new BlockingLane(`move-${Date.now()}`, () => {});
    const [host, port] = ['127.0.0.1', redis.port];
    try {
      lane.retarget({ host, port }, `${host}:${port}`);
      expect(await lane.prepare(5000, NEVER)).toBe(true);
      const seen = record(lane);
      lane.retarget({ host, port }, `${host}:${port}`);
      expect(await lane.prepare(5000, NEVER)).toBe(true);
      seen.stop();
      expect(seen.states.filter((s) => s !== 'ready')).toEqual([]);
    } finally {
      await lane.close();
    }
  });

  it('reads as what it is once a park could not be sent on it in time: a node that takes the connection and never answers', async (ctx) => {
    if (redis.cluster) ctx.skip();
    const lane = new BlockingLane(`move-${Date.now()}`, () => {});
    const silent = await silentPort();
    const [host, port] = ['127.0.0.1', redis.port];
    try {
      lane.retarget({ host, port }, `${host}:${port}`);
      expect(await lane.prepare(5000, NEVER)).toBe(true);
      const seen = record(lane);
      lane.retarget({ host: '127.0.0.1', port: silent.port, retryStrategy: () => null }, `127.0.0.1:${silent.port}`);
      expect(await lane.prepare(200, NEVER)).toBe(false);
      // Before the fix it read as `ready` for as long as the node stayed silent (ioredis' ready check waits for ever).
      await waitFor(() => seen.states.at(-1) === 'connecting', { message: 'the reported state no longer ready' });
      seen.stop();
      expect(await firstValueFrom(lane.state$)).toBe('connecting');
    } finally {
      await lane.close();
      await silent.close();
    }
  });
});
