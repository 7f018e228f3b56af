/**
 * PauseWatch (consumer/intake/pause-watch.ts) against its interface on a real Redis: which of a
 * reader's streams an operator paused for its group, seen by their flags (`<stream>:paused:<group>`),
 * at each look; what a (re)start drains and what a resume owes a drain; a refusal reads as running.
 */
import { randomUUID } from 'node:crypto';
import type { Subscription } from 'rxjs';
import { PauseWatch } from '../libs/redis-streams/src/consumer/intake/pause-watch.js';
import { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import { aclUser } from './support/acl.js';
import { captureLogs } from './support/logs.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const watching: Subscription[] = [];
afterEach(() => {
  for (const s of watching.splice(0)) s.unsubscribe();
});

/** A watch of group `g` over two fresh streams, on `conn` (default: the admin connection); the operator's pauses on the admin one. */
function watchOf(conn = redis.client()) {
  const prefix = uniquePrefix();
  const streams = [`${prefix}a`, `${prefix}b`] as const;
  const { logger, lines } = captureLogs();
  const watch = new PauseWatch({ pauses: new StreamCommands(conn, 'g').pauses, group: 'g', streams, checkMs: 20, logger });
  let changes = 0;
  watching.push(watch.changed$.subscribe(() => changes++));
  const ops = new StreamCommands(redis.client(), 'g').pauses;
  return { watch, streams, lines, ops, changes: () => changes };
}

describe('PauseWatch', () => {
  it("sees a pause and a resume by the flag at its next look: has, anyPaused, readable, one change and one line each; another group's flag pauses nothing", async () => {
    const { watch, streams, lines, ops, changes } = watchOf();
    const [a, b] = streams;
    await watch.look();
    expect([watch.anyPaused, watch.readable(), changes()]).toEqual([false, streams, 0]);
    await ops.pause(a, 'other-group', 'ops');
    await watch.look();
    expect(watch.anyPaused).toBe(false);
    await ops.pause(a, 'g', 'ops');
    await watch.look();
    expect([watch.has(a), watch.has(b), watch.anyPaused, watch.readable(), changes()]).toEqual([true, false, true, [b], 1]);
    // Nothing changed: no change told.
    await watch.look();
    expect(changes()).toBe(1);
    await ops.resume(a, 'g');
    await watch.look();
    expect([watch.has(a), watch.anyPaused, changes()]).toEqual([false, false, 2]);
    // None paused: the reader's own array, not a copy.
    expect(watch.readable()).toBe(streams);
    expect(lines.filter((l) => l.startsWith('log'))).toEqual([
      `log "${a}" paused for group "g": what is in hand finishes, nothing new starts until it resumes`,
      `log "${a}" resumed for group "g"`,
    ]);
  });

  it('a stream paused at a (re)start is not drained then, and owes its drain once it resumes (once)', async () => {
    const { watch, streams, ops } = watchOf();
    const [a, b] = streams;
    await ops.pause(a, 'g', 'ops');
    await watch.look();
    expect(watch.drainable()).toEqual([b]);
    expect(watch.owesDrain).toBe(false);
    await ops.resume(a, 'g');
    await watch.look();
    expect(watch.owesDrain).toBe(true);
    expect(watch.takeResumed()).toEqual([a]);
    expect([watch.owesDrain, watch.takeResumed()]).toEqual([false, []]);
  });

  it('its looks$ look every checkMs until unsubscribed', async () => {
    const { watch, streams, ops } = watchOf();
    watching.push(watch.looks$.subscribe());
    await ops.pause(streams[1], 'g', 'ops');
    await waitFor(() => watch.has(streams[1]), { message: 'the pause seen by a look' });
    await ops.resume(streams[1], 'g');
    await waitFor(() => !watch.anyPaused, { message: 'the resume seen by a look' });
  });

  it('a user the ACL refuses EXISTS on the flags: said once, read as running; a Redis failure rejects', async () => {
    const name = `pw-${randomUUID().slice(0, 8)}`;
    const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~*', '&*', '+@all', '-exists']);
    const conn = redis.newClient();
    await conn.call('AUTH', user.username, user.password);
    const { watch, streams, lines, ops } = watchOf(conn);
    await ops.pause(streams[0], 'g', 'ops');
    await watch.look();
    await watch.look();
    expect(watch.anyPaused).toBe(false);
    expect(lines.filter((l) => l.startsWith('error'))).toHaveLength(1);
    expect(lines[0]).toMatch(/^error cannot read the pause flags of group "g" \(NOPERM.*\): this consumer cannot be paused$/);
    conn.disconnect();
    await expect(watch.look()).rejects.toThrow();
  });
});
