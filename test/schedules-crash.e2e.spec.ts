import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { Schedules } from 'nestjs-redis-streams';
import { startFixture } from './support/fixture-process.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';
import { redisNow } from './support/redis-clock.js';
import { delayedKeysOf, scheduleKeysOf } from '../libs/redis-streams/src/key-names.js';
import { MISSED_AFTER_MS } from '../libs/redis-streams/src/schedule-times.js';

// Repeatable schedules fired by three worker processes, killed -9 one by one and then all at once across fire
// times, restarted, while the schedules are updated and removed. The checker counts outside the workers: the
// stream's entries (XRANGE: a fire handed over twice would show twice) and an append-only log of handlings.
//
// Lateness bound, stated: 95 % of the fires due while at least one worker ran go in within LATE_BOUND_MS of their
// time, every one within four times it. The
// delayed path's precision is a look (flowCheckMs 100 here) when the worker that handed a fire over is killed
// before it is due (a peer's promoter finds it at its next look); the bound is generous for a machine shared with
// other processes. Fires due while no worker ran go in once, at the restart (catchUp 'once'; the outage is shorter
// than MISSED_AFTER_MS, so none of them counts as missed and none is skipped).

const LATE_BOUND_MS = 1_500;

const redis = useRedis();
const { children, dirs } = useLeftoversAfterEach();

const msOf = (id: string) => Number(id.split('-')[0]);

function exited(child: ChildProcess): Promise<unknown> {
  return new Promise((r) => (child.exitCode !== null || child.signalCode !== null ? r(0) : child.once('exit', r)));
}

describe('repeatable schedules across worker crashes', () => {
  it('three workers, kill -9s and a restart of every worker across fire times: each fire once, none early, lateness bounded', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}ticks`;
    const dir = mkdtempSync(join(tmpdir(), 'schedules-'));
    dirs.push(dir);
    const log = join(dir, 'handled.log');
    const conn = JSON.stringify(redis.connection);
    const worker = (name: string) => startFixture(children, 'schedule-worker.mjs', [conn, prefix, name, log]);
    const client = redis.client();
    const schedules = new Schedules(client);
    const now = () => redisNow(client);
    /** Redis-clock windows in which no worker ran. */
    const down: [number, number][] = [];

    let workers = [await worker('w1'), await worker('w2'), await worker('w3')];
    await schedules.set(stream, 'fast', { every: 250, payload: { v: 1 } });
    for (let i = 0; i < 20; i++) await schedules.set(stream, `s${i}`, { every: 1000, payload: { i } });
    const count = async () => client.xlen(stream);
    const grown = async (n: number) => {
      const from = await count();
      await waitFor(async () => (await count()) >= from + n, { message: `${n} more fires`, timeoutMs: 20_000 });
    };
    await grown(40);
    // One worker killed mid-flight, a new one started; then an update while they fire.
    workers[0]!.child.kill('SIGKILL');
    await exited(workers[0]!.child);
    workers = [workers[1]!, workers[2]!, await worker('w4')];
    await grown(30);
    await schedules.set(stream, 'fast', { every: 250, payload: { v: 2 } });
    await grown(30);
    // Every worker killed at once, across at least two fires of each schedule, then all restarted. The restarted
    // ones are loaded beforehand and held, so that the outage stays under MISSED_AFTER_MS however slow Node's start.
    const go = join(dir, 'go');
    const held: Awaited<ReturnType<typeof startFixture>>[] = [];
    for (const name of ['w5', 'w6', 'w7'])
      held.push(await startFixture(children, 'schedule-worker.mjs', [conn, prefix, name, log, go], 'loaded'));
    for (const w of workers) w.child.kill('SIGKILL');
    await Promise.all(workers.map((w) => exited(w.child)));
    const downFrom = await now();
    await waitFor(async () => (await now()) - downFrom >= 2_200, { message: 'two fires of every schedule to pass', intervalMs: 100 });
    const restarting = await now();
    writeFileSync(go, '');
    await waitFor(() => held.some((w) => w.out().includes('ready\n')), { message: 'a restarted worker reading' });
    const upAt = await now();
    await waitFor(() => held.every((w) => w.out().includes('ready\n')), { message: 'every restarted worker reading' });
    down.push([downFrom, upAt]);
    // A restart slower than MISSED_AFTER_MS (a machine busy with other work) makes the outage's fires missed: each
    // schedule then fires once late and goes on from now (catchUp 'once'), which the checks below allow for.
    const missed = upAt - downFrom >= MISSED_AFTER_MS - 500;
    await grown(40);
    // Removes while they fire: nothing of a removed schedule goes in afterwards.
    for (let i = 0; i < 20; i += 2) expect(await schedules.remove(stream, `s${i}`)).toBe(true);
    const removedAt = await now();
    await grown(30);
    for (const s of await schedules.list(stream)) await schedules.remove(stream, s.id);
    const allRemovedAt = await now();
    expect(await client.hlen(scheduleKeysOf(stream, redis.cluster).records)).toBe(0);
    // Everything handed over went in (the delayed schedule empty) and was handled (the log has every entry).
    await waitFor(async () => (await client.zcard(delayedKeysOf(stream, redis.cluster).schedule)) === 0, {
      message: 'the delayed schedule empty',
    });
    const rows = (await client.xrange(stream, '-', '+')) as [string, string[]][];
    const lines = () => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n').filter(Boolean) : []);
    await waitFor(() => new Set(lines().map((l) => l.split(' ')[2])).size >= rows.length, {
      message: 'every entry handled',
      timeoutMs: 30_000,
    });

    const entries = rows.map(([id, f]) => ({
      id,
      schedule: f[f.indexOf('scheduleId') + 1]!,
      at: Number(f[f.indexOf('fireTime') + 1]),
      v: (JSON.parse(f[f.indexOf('data') + 1]!) as { v?: number }).v,
    }));
    // Exactly once: no (schedule, fire time) twice.
    const keys = entries.map((e) => `${e.schedule}@${e.at}`);
    expect(keys.length - new Set(keys).size).toBe(0);
    // None early.
    expect(entries.filter((e) => msOf(e.id) < e.at)).toEqual([]);
    // None lost: every schedule's fire times consecutive from its first to its last (the outage fired late, not skipped).
    const bySchedule = new Map<string, number[]>();
    for (const e of entries) bySchedule.set(e.schedule, [...(bySchedule.get(e.schedule) ?? []), e.at]);
    for (const [id, times] of bySchedule) {
      const period = id === 'fast' ? 250 : 1000;
      times.sort((a, b) => a - b);
      let skips = 0;
      for (let i = 1; i < times.length; i++) {
        const gap = times[i]! - times[i - 1]!;
        // A missed fire went in once, late, and the next is the first after the look that found it missed: a gap
        // longer than MISSED_AFTER_MS, once, from a fire of the outage. A fire lost anywhere else is a short gap.
        if (missed && gap > MISSED_AFTER_MS && times[i - 1]! >= downFrom - period && times[i - 1]! <= upAt && skips++ === 0) continue;
        expect(gap, `${id} after ${times[i - 1]}`).toBe(period);
      }
    }
    // Removed schedules: nothing due after the remove went in.
    for (let i = 0; i < 20; i += 2)
      expect(entries.filter((e) => e.schedule === `s${i}` && msOf(e.id) > removedAt + LATE_BOUND_MS)).toEqual([]);
    expect(entries.filter((e) => e.at > allRemovedAt)).toEqual([]);
    // The update: v1 fires, then v2 fires, never a v1 after a v2.
    const fast = entries.filter((e) => e.schedule === 'fast').sort((a, b) => a.at - b.at);
    const firstV2 = fast.findIndex((e) => e.v === 2);
    expect(firstV2).toBeGreaterThan(0);
    expect(fast.slice(firstV2).every((e) => e.v === 2)).toBe(true);
    // Lateness of fires due while a worker ran.
    const covered = entries.filter((e) => !down.some(([a, b]) => e.at >= a - 1000 && e.at <= b + 1000));
    const lateness = covered.map((e) => msOf(e.id) - e.at).sort((a, b) => a - b);
    // The bulk within the bound; the latest within four times it (CI's Valkey lane saw 1,523 ms on a machine busy with
    // other lanes: one look held up, not a fire left behind, which the fire-by-fire checks above would catch).
    expect(lateness[Math.floor(lateness.length * 0.95)]!).toBeLessThanOrEqual(LATE_BOUND_MS);
    expect(lateness.at(-1)!).toBeLessThanOrEqual(4 * LATE_BOUND_MS);
    const outage = entries.filter((e) => e.at >= downFrom && e.at < restarting);
    expect(outage.length).toBeGreaterThanOrEqual((missed ? 1 : 2) * 21);
    console.log(
      `schedules crash: ${entries.length} fires, ${lines().length} handlings; lateness while a worker ran p50 ${lateness[Math.floor(lateness.length / 2)]} ms, ` +
        `p99 ${lateness[Math.floor(lateness.length * 0.99)]} ms, max ${lateness.at(-1)} ms; ${outage.length} fires due during the outage went in at the restart (outage ${upAt - downFrom} ms${missed ? ': missed, fired once' : ''})`,
    );
  }, 120_000);
});
