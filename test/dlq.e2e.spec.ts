import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DeadLetters, DeadLetterException } from 'nestjs-redis-streams';
import { repoRoot, requireBuilt } from './support/built.js';
import { CLUSTER_MODE, deadLetterKey, startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis()));
afterAll(async () => redis?.stop());

const start = useApps();

/** A running consumer that dead-letters every entry whose payload says `poison`. */
async function poisoned(count: number) {
  const prefix = uniquePrefix();
  const app = await start({ connection: redis.connection, group: 'g', keyPrefix: prefix, blockMs: 50 });
  let healed = false;
  app.recorder.behavior = (call) => {
    if (!healed && (call.payload as { poison?: string }).poison) throw new DeadLetterException('poisoned');
  };
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push((await redis.client().xadd(app.key(), '*', 'poison', 'yes', 'n', String(i)))!);
  await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === count, { message: `${count} dead letters` });
  return { app, ids, dead: deadLetterKey(app.key()), heal: () => (healed = true) };
}

const cli = async (...args: string[]) => {
  const script = requireBuilt('libs/redis-streams/dist/esm/cli/dlq.js');
  const { stdout } = await promisify(execFile)(process.execPath, [script, ...args, ...(redis.cluster ? ['--cluster', (redis.connection as string[]).join(',')] : ['--url', redis.url])], { cwd: repoRoot });
  return stdout;
};

describe('dead-letter tooling', () => {
  it('lists dead letters and re-drives chosen ones to their source stream, exactly once', async () => {
    const { app, ids, dead, heal } = await poisoned(3);
    const dlq = new DeadLetters(redis.client());
    const letters = await dlq.list(dead);
    expect(letters.map((d) => [d.stream, d.sourceId, d.error])).toEqual(ids.map((id) => [app.key(), id, 'handler refused it: poisoned']));

    heal();
    const [first] = letters;
    const results = await Promise.all([dlq.redrive(dead, [first!.id!]), dlq.redrive(dead, [first!.id!])]);
    // Two operators re-driving the same entry at once: one wins, the other finds it gone.
    expect(results.flat().filter((r) => r.newId).length).toBe(1);
    const newId = results.flat().find((r) => r.newId)!.newId!;
    await waitFor(() => app.settled.some((e) => e.id === newId && e.outcome === 'acked'), { message: 'the re-driven entry to be handled' });
    expect(app.recorder.calls.find((c) => c.id === newId)!.fields).toEqual({ poison: 'yes', n: '0' });
    expect(await dlq.count(dead)).toBe(2);
  });

  it('has a CLI that lists and re-drives (--all)', async () => {
    const { app, dead, heal } = await poisoned(2);
    const listed = await cli('list', dead);
    expect(listed).toContain(`2 entries in "${dead}"`);
    expect(listed).toContain('handler refused it: poisoned');
    const json = (await cli('list', dead, '--json')).trim().split('\n').map((l) => JSON.parse(l));
    expect(json.map((d) => d.fields)).toEqual([
      ['poison', 'yes', 'n', '0'],
      ['poison', 'yes', 'n', '1'],
    ]);

    heal();
    const redriven = await cli('redrive', dead, '--all');
    expect(redriven.trim().split('\n')).toHaveLength(2);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 2, { message: 'both re-driven entries handled' });
    expect(await redis.client().xlen(dead)).toBe(0);
  });

  // Argument and URL errors do not depend on the deployment: the one-node run covers them.
  it.skipIf(CLUSTER_MODE)('answers --help on stdout with exit 0, and refuses an unknown command, a bad URL and an unreachable server clearly', async () => {
    const script = requireBuilt('libs/redis-streams/dist/esm/cli/dlq.js');
    const run = (...args: string[]) =>
      promisify(execFile)(process.execPath, [script, ...args], { cwd: repoRoot }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
      );
    const help = await run('--help');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage:/);

    const unknown = await run('purge', 'orders:dead', '--url', redis.url);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown command "purge"/);

    const badUrl = await run('list', 'orders:dead', '--url', 'http://127.0.0.1:6379');
    expect(badUrl.code).toBe(1);
    expect(badUrl.stderr).toMatch(/invalid option "connection": URL must start with redis:\/\/ or rediss:\/\//);

    const down = await run('list', 'orders:dead', '--url', 'redis://ops:s3cret@127.0.0.1:1/2');
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/cannot connect to redis:\/\/ops:\*\*\*@127\.0\.0\.1:1\/2: connect ECONNREFUSED/);
    expect(down.stderr).not.toContain('s3cret');
  });
});
