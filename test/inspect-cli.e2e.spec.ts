import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireBuilt, repoRoot } from './support/built.js';
import { deadLetterKey, startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

/** Runs `redis-streams …` against the test's Redis; resolves with its exit code and output, whatever the code. */
async function cli(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const script = requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
  const target = args.includes('--url') ? [] : redis.cluster ? ['--cluster', (redis.connection as string[]).join(',')] : ['--url', redis.url];
  return promisify(execFile)(process.execPath, [script, ...args, ...target], { cwd: repoRoot }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );
}

/** A stream with group `g`: 5 entries, 3 delivered to `busy` (1 of them acked), 1 dead letter, an idle consumer `gone`. */
async function scene() {
  const prefix = uniquePrefix();
  const key = `${prefix}orders`;
  const r = redis.client();
  await r.xgroup('CREATE', key, 'g', '0', 'MKSTREAM');
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  await r.xreadgroup('GROUP', 'g', 'busy', 'COUNT', 3, 'STREAMS', key, '>');
  await r.xack(key, 'g', ids[0]!);
  await r.call('XGROUP', 'CREATECONSUMER', key, 'g', 'gone');
  await r.xadd(deadLetterKey(key), '*', 'stream', key, 'sourceId', ids[4]!, 'fields', '["n","4"]');
  return { prefix, key, ids };
}

describe('redis-streams inspect', () => {
  it('reports per stream, group and consumer what an operator asks first, as JSON and as text', async () => {
    const { key, ids } = await scene();
    const json = await cli('inspect', key, '--json');
    expect(json.code).toBe(0);
    const [report] = JSON.parse(json.stdout) as any[];
    expect(report).toMatchObject({
      stream: key,
      length: 5,
      lastGeneratedId: ids[4],
      entriesAdded: 5,
      deadLetters: [{ stream: deadLetterKey(key), length: 1 }],
      groups: [{ name: 'g', pending: 2, lastDeliveredId: ids[2], lag: 2, entriesRead: 3 }],
    });
    const consumers = Object.fromEntries((report.groups[0].consumers as any[]).map((c) => [c.name, c]));
    expect(consumers.busy).toMatchObject({ pending: 2 });
    expect(consumers.busy.oldestPendingAgeMs).toBeGreaterThanOrEqual(0);
    expect(consumers.gone).toMatchObject({ pending: 0, oldestPendingAgeMs: null });
    expect(typeof consumers.gone.idleMs).toBe('number');

    const text = await cli('inspect', key);
    expect(text.stdout).toContain(`${key}  length 5  last id ${ids[4]}`);
    expect(text.stdout).toContain(`group g  lag 2  pending 2  last delivered ${ids[2]}  consumers 2`);
    expect(text.stdout).toMatch(/busy {2}pending 2 {2}idle .* {2}oldest pending /);
    expect(text.stdout).toContain(`dead letters: ${deadLetterKey(key)} 1`);
  });

  it('finds the streams with a group under --match, and --watch refreshes with rates', async () => {
    const { prefix, key } = await scene();
    // Not listed: no group (a dead-letter stream, a reply stream).
    const listed = await cli('inspect', '--match', `${prefix}*`, '--json');
    expect((JSON.parse(listed.stdout) as { stream: string }[]).map((s) => s.stream)).toEqual([key]);
    const watched = await cli('inspect', key, '--watch', '--interval', '100', '--times', '2', '--json');
    expect(watched.code).toBe(0);
    const frames = watched.stdout.trim().split('\n').map((line) => JSON.parse(line) as { at: number; streams: unknown[]; rates?: { produced: Record<string, number>; consumed: Record<string, number> } });
    expect(frames).toHaveLength(2);
    expect(frames[0]!.rates).toBeUndefined();
    expect(frames[1]!.rates).toEqual({ produced: { [key]: 0 }, consumed: { [`${key} g`]: 0 } });
  });
});

describe('redis-streams consumers prune and dlq', () => {
  it('prunes idle consumers that own nothing, and keeps the dead-letter commands', async () => {
    const { key } = await scene();
    const pruned = await cli('consumers', 'prune', key, '--group', 'g', '--idle-ms', '1', '--json');
    expect(pruned.code).toBe(0);
    expect(JSON.parse(pruned.stdout)).toEqual(['gone']);
    const find = await cli('dlq', 'find', key, '--json');
    expect(JSON.parse(find.stdout)).toEqual([deadLetterKey(key)]);
    const list = await cli('dlq', 'list', deadLetterKey(key), '--json');
    expect(JSON.parse(list.stdout.trim())).toMatchObject({ stream: key, fields: ['n', '4'] });
  });

  it('answers --help on stdout, refuses a bad command with exit 2, and names an unreachable server (password masked)', async () => {
    const help = await cli('--help');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage:\n {2}redis-streams inspect/);
    const bad = await cli('purge');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/unknown command "purge"/);
    const prune = await cli('consumers', 'prune', 'orders', '--idle-ms', '1');
    expect(prune.code).toBe(2);
    expect(prune.stderr).toMatch(/needs --group/);
    const down = await cli('inspect', 'orders', '--url', 'redis://ops:s3cret@127.0.0.1:1');
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot connect to redis:\/\/ops:\*\*\*@127\.0\.0\.1:1: connect ECONNREFUSED/);
    expect(down.stderr).not.toContain('s3cret');
  });
});
