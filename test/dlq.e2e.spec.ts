import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { DeadLetters, DeadLetterException } from 'nestjs-redis-streams';
import { aclUser } from './support/acl.js';
import { runCli } from './support/cli.js';
import { repoRoot, requireBuilt } from './support/built.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { forgeDeadLetter } from './support/dead-letter.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();

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
  return { app, ids, prefix, dead: deadLetterKey(app.key()), heal: () => (healed = true) };
}

/** The CLI's exit code and output, whatever the code. */
const cliRun = (...args: string[]) => runCli(redis, args, 'redis-streams-dlq');

/** The fields of a dead letter of `stream` whose entry was `['n', n]`. */
const letterFields = (stream: string, n: string) =>
  ['stream', stream, 'sourceId', '1-1', 'group', 'g', 'consumer', 'c', 'deliveryCount', '9', 'error', 'x'].concat([
    'fields',
    JSON.stringify(['n', n]),
    'deadAt',
    '0',
  ]);

/** A dead letter as a producer could write it by hand, naming `stream` and carrying `fields` (a JSON text). */
const forge = (dead: string, stream: string, fields: string) =>
  forgeDeadLetter(redis.client(), dead, stream, { deliveryCount: '9', error: 'x', deadAt: '0', fields });

const fieldsOf = async (key: string, id: string) => (await redis.client().xrange(key, id, id))[0]?.[1];

/** The CLI's output; rejects on a non-zero exit. */
const cli = async (...args: string[]) => {
  const run = await cliRun(...args);
  if (run.code !== 0) throw new Error(`redis-streams-dlq ${args.join(' ')} exited with ${run.code}: ${run.stderr}`);
  return run.stdout;
};

describe('dead-letter tooling, a redrive cut short', () => {
  it.skipIf(CLUSTER_MODE)('a redrive that loses its server prints each letter as it moves and says where it stopped', async () => {
    const prefix = uniquePrefix();
    const key = `${prefix}orders`;
    const dead = deadLetterKey(key);
    const admin = redis.client();
    for (let i = 0; i < 2_000; i += 500)
      await admin.pipeline(Array.from({ length: 500 }, (_, j) => ['xadd', dead, '*', ...letterFields(key, String(i + j))])).exec();
    const running = cliRun('redrive', dead, '--all', '--timeout-ms', '500');
    // Writes paused once the first letters have moved: the redrive's next script waits past its deadline.
    await waitFor(async () => (await admin.xlen(key)) >= 10, { message: 'the first letters re-driven' });
    await admin.call('CLIENT', 'PAUSE', '3000', 'WRITE');
    const run = await running;
    await admin.call('CLIENT', 'UNPAUSE');
    const printed = run.stdout.split('\n').filter((line) => line.includes(' → '));
    // The letter in flight when the deadline passed may have moved after the pause (at least once).
    await waitFor(async () => (await admin.xlen(key)) >= printed.length, { message: 'every printed letter in the stream' });
    expect(run.code).toBe(1);
    expect(printed.length).toBeGreaterThanOrEqual(10);
    expect(printed.length).toBeLessThan(2_000);
    expect(await admin.xlen(key)).toBeLessThanOrEqual(printed.length + 1);
    expect(run.stderr).toMatch(new RegExp(`no answer from redis://127\\.0\\.0\\.1:${redis.port} within 500 ms`));
    expect(run.stderr).toMatch(new RegExp(`${printed.length} re-driven \\(above\\)`));
  });
});

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
    // Each letter's stack under it: the exception, then its frames.
    expect(listed).toMatch(/\n {4}\| DeadLetterException: poisoned\n {4}\| {5}at /);
    const json = (await cli('list', dead, '--json'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
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

  it('writes only to the stream whose dead letters it reads: a letter naming another key is skipped, a request is re-driven as a plain event', async () => {
    const { app, prefix, dead, heal } = await poisoned(1);
    heal();
    // Another key of the dead-letter stream's slot, so that a one-script write to it would be possible.
    const victim = `${dead}:victim`;
    const forged = await forge(dead, victim, JSON.stringify(['amount', '1000000', 'to', 'attacker']));
    const replyTo = `${prefix}replies:${crypto.randomUUID()}`;
    const request = await forge(
      dead,
      app.key(),
      JSON.stringify(['data', '{"n":"req"}', 'correlationId', 'c-1', 'replyTo', replyTo, 'headers', '{"h":"1"}']),
    );

    const run = await cliRun('redrive', dead, '--all', '--json');
    expect(await redis.client().exists(victim)).toBe(0);
    expect(run.code).toBe(1);
    const results = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(results.find((r) => r.id === forged)).toMatchObject({
      stream: app.key(),
      newId: null,
      skipped: expect.stringContaining(victim),
    });
    const redriven = results.find((r) => r.id === request)!.newId as string;
    expect(redriven).toMatch(/^\d+-\d+$/);
    expect(await fieldsOf(app.key(), redriven)).toEqual(['data', '{"n":"req"}', 'headers', '{"h":"1"}']);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'acked').length === 2, {
      message: 'the real letter and the request, handled',
    });
    expect(app.recorder.calls.map((c) => c.payload)).toContainEqual({ n: 'req' });
    expect(await redis.client().exists(replyTo)).toBe(0);
    // The skipped letter stays where it was, the two others are gone.
    expect((await redis.client().xrange(dead, '-', '+')).map(([id]) => id)).toEqual([forged]);

    // The API says the same, and a dead-letter key whose source the names cannot tell needs an explicit target.
    const dlq = new DeadLetters(redis.client());
    expect(await dlq.redrive(dead, [forged])).toEqual([
      { id: forged, stream: app.key(), newId: null, skipped: expect.stringContaining(victim) },
    ]);
    await expect(dlq.redrive(`${app.key()}:graveyard`, 'all')).rejects.toThrow(/cannot tell which stream .*graveyard.* name it/);
    const custom = `${app.key()}:graveyard`;
    const ok = await forge(custom, app.key(), JSON.stringify(['n', 'custom']));
    expect(await dlq.redrive(custom, 'all', { stream: app.key() })).toMatchObject([
      { id: ok, stream: app.key(), newId: expect.any(String) },
    ]);
  });

  it('re-drives the others past letters it cannot write: a 4,001-field entry goes back whole, malformed letters are reported and kept', async () => {
    const { app, dead, heal } = await poisoned(1);
    const wide = ['poison', 'yes'];
    for (let i = 0; i < 4000; i++) wide.push(`f${i}`, String(i));
    await redis.client().xadd(app.key(), '*', ...wide);
    await waitFor(() => app.settled.filter((e) => e.outcome === 'dead-lettered').length === 2, { message: 'the wide entry dead-lettered' });
    const bad = [
      await forge(dead, app.key(), 'not json'),
      await forge(dead, app.key(), '["odd"]'),
      await forge(dead, app.key(), '[1,{}]'),
      await forge(dead, app.key(), '{"a":"b"}'),
    ];
    const good = await forge(dead, app.key(), '["n","after"]');
    heal();
    const run = await cliRun('redrive', dead, '--all', '--json');
    expect(run.code).toBe(1);
    const results = run.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(results).toHaveLength(7);
    for (const id of bad) expect(results.find((r) => r.id === id)).toMatchObject({ newId: null, skipped: expect.stringMatching(/fields/) });
    expect(results.find((r) => r.id === good)!.newId).toMatch(/^\d+-\d+$/);
    // Oldest first: the first poisoned entry, then the wide one.
    const wideResult = results[1];
    expect(await fieldsOf(app.key(), wideResult.newId)).toEqual(wide);
    expect((await redis.client().xrange(dead, '-', '+')).map(([id]) => id)).toEqual(bad);
  });

  it('reports every letter of a stream it cannot append to (WRONGTYPE) and keeps them', async () => {
    const prefix = uniquePrefix();
    const source = `${prefix}str`;
    const dead = deadLetterKey(source);
    await redis.client().set(source, 'a string');
    // The last one too wide for the script: appended by the client, where a refused XADD must not take its XDEL with it.
    const wide = JSON.stringify(Array.from({ length: 8002 }, (_, i) => `v${i}`));
    const letters = [await forge(dead, source, '["n","1"]'), await forge(dead, source, '["n","2"]'), await forge(dead, source, wide)];
    const run = await cliRun('redrive', dead, '--all');
    expect(run.code).toBe(1);
    expect(run.stdout.trim().split('\n')).toEqual(letters.map((id) => expect.stringMatching(new RegExp(`^${id}: skipped .*WRONGTYPE`))));
    expect(await redis.client().xlen(dead)).toBe(3);
  });

  // ACL users are per node: the one-node run covers it.
  it.skipIf(CLUSTER_MODE)(
    'says so when it appended a letter it could not delete (no XDEL right), narrow or wide, instead of calling it skipped',
    async () => {
      const prefix = uniquePrefix();
      const source = `${prefix}orders`;
      const dead = deadLetterKey(source);
      await redis.client().xadd(source, '*', 'seed', '1');
      const wide = JSON.stringify(Array.from({ length: 8002 }, (_, i) => `v${i}`));
      const letters = [await forge(dead, source, '["n","1"]'), await forge(dead, source, wide)];
      const operator = new Redis(
        await aclUser(redis.client(), redis.port, `ops-${prefix}`, prefix, ['on', '>pw', `~${prefix}*`, '+@all', '-xdel']),
      );
      try {
        const results = await new DeadLetters(operator).redrive(dead, 'all');
        expect(results.map((r) => r.id)).toEqual(letters);
        for (const r of results) {
          expect(r.newId).toMatch(/^\d+-\d+$/);
          expect(r.skipped).toMatch(/not deleted/);
        }
        expect(await redis.client().xlen(source)).toBe(3);
        expect(await redis.client().xlen(dead)).toBe(2);
      } finally {
        operator.disconnect();
      }
    },
  );

  it('skips a letter whose fields hold raw control bytes (its listing could not show them), and re-drives nothing of it', async () => {
    const prefix = uniquePrefix();
    const source = `${prefix}ctl`;
    const dead = deadLetterKey(source);
    await redis.client().xadd(source, '*', 'seed', '1');
    const id = await forge(dead, source, '["amount","1000000","to","attacker\u0001"]');
    const run = await cliRun('redrive', dead, '--all');
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(new RegExp(`^${id}: skipped .*not a JSON array`, 'm'));
    expect(await redis.client().xlen(source)).toBe(1);
  });

  it('lists a forged stack inert: every control character escaped, each line its own', async () => {
    const source = `${uniquePrefix()}ctl`;
    const dead = deadLetterKey(source);
    await redis
      .client()
      .xadd(
        dead,
        '*',
        'stream',
        source,
        'sourceId',
        '1-1',
        'error',
        'e',
        'deadAt',
        '0',
        'stack',
        'Error: x\u001b[2J\u0007\n    at y\r\u202e',
        'fields',
        '[]',
      );
    const listed = await cli('list', dead);
    expect(listed).toContain('\n    | Error: x\\x1b[2J\\x07\n    |     at y\\x0d\\u202e\n');
    // eslint-disable-next-line no-control-regex -- the point: none printed raw
    expect(listed).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u202e]/);
    // A forged stack of 100,000 lines prints 60 of them and says how many more (review finding: all were printed).
    const long = Array.from({ length: 100_000 }, (_, i) => `    at f${i}`).join('\n');
    await redis
      .client()
      .xadd(dead, '*', 'stream', source, 'sourceId', '1-2', 'error', 'e', 'deadAt', '0', 'stack', `Error: y\n${long}`, 'fields', '[]');
    const lines = (await cli('list', dead)).split('\n');
    expect(lines.filter((l) => l.startsWith('    | '))).toHaveLength(2 + 60 + 1);
    expect(lines).toContain('    | … 99941 more lines (--json prints them)');
  });

  it('moves bytes: a binary value is dead-lettered and re-driven byte-exact', async () => {
    const { app, dead, heal } = await poisoned(0);
    const bin = Buffer.from('82a26964cdfffea176c3', 'hex');
    const id = (await redis.client().xadd(app.key(), '*', 'poison', 'yes', 'bin', bin))!;
    await waitFor(() => app.settled.some((e) => e.id === id && e.outcome === 'dead-lettered'), {
      message: 'the binary entry dead-lettered',
    });
    heal();
    const [result] = await new DeadLetters(redis.client()).redrive(dead, 'all');
    const [entry] = await redis.client().xrangeBuffer(app.key(), result!.newId!, result!.newId!);
    expect(entry![1].map((b) => b.toString('hex'))).toEqual(
      [Buffer.from('poison'), Buffer.from('yes'), Buffer.from('bin'), bin].map((b) => b.toString('hex')),
    );
  });

  // Argument and URL errors do not depend on the deployment: the one-node run covers them.
  it.skipIf(CLUSTER_MODE)(
    'answers --help on stdout with exit 0, and refuses an unknown command, a bad URL and an unreachable server clearly',
    async () => {
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
    },
  );
});
