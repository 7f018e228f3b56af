import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { requireBuilt, repoRoot } from './support/built.js';
import { runCli, runCliProcess } from './support/cli.js';
import { waitFor } from './support/wait-for.js';
import { CLUSTER_MODE, deadLetterKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix } from './support/test-app.js';
import { createGroup } from './support/backlog.js';
import { useApps } from './support/test-app.js';

const redis = useRedis();
const start = useApps();
const cli = (...args: string[]) => runCli(redis, args);
const dlqCli = (...args: string[]) => runCli(redis, args, 'redis-streams-dlq');

/** A work stream with group `g`, three entries (the first in the hand of `stuck`), and two dead letters in its dead-letter stream. */
async function scene() {
  const key = `${uniquePrefix()}orders`;
  const dead = deadLetterKey(key);
  const r = redis.client();
  await createGroup(r, key);
  const ids: string[] = [];
  ids.push((await r.xadd(key, '*', 'data', '{"note":"\u001b[31mred"}'))!);
  for (let i = 1; i < 3; i++) ids.push((await r.xadd(key, '*', 'n', String(i)))!);
  await r.xreadgroup('GROUP', 'g', 'stuck', 'COUNT', 1, 'STREAMS', key, '>');
  const letters: string[] = [];
  for (const n of ['7', '8'])
    letters.push((await r.xadd(dead, '*', 'stream', key, 'sourceId', `1-${n}`, 'error', 'boom', 'fields', `["n","${n}"]`, 'deadAt', '1'))!);
  return { key, dead, ids, letters };
}

describe('operator CLI: dead-letter streams only', () => {
  it('refuses to list a work stream as dead letters (exit 2, naming the dead-letter stream), lists an empty or custom-named one', async () => {
    const { key, dead } = await scene();
    for (const run of [cli('dlq', 'list', key), dlqCli('list', key), cli('dlq', 'redrive', key, '--all', '--to', key)]) {
      const refused = await run;
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`"${key}" is not a dead-letter stream`);
      expect(refused.stderr).toContain(`"${dead}"`);
      expect(refused.stdout).not.toMatch(/1970/);
    }
    expect((await cli('dlq', 'list', `${key}:nothing`)).code).toBe(0);
    const custom = `${key}-letters`;
    await redis.client().xadd(custom, '*', 'stream', key, 'sourceId', '1-1', 'error', 'x', 'fields', '[]', 'deadAt', '1');
    expect(await cli('dlq', 'list', custom, '--json')).toMatchObject({ code: 0 });
  });

  it('exits 2 on every usage error, as the README says', async () => {
    const { dead } = await scene();
    const usage = [
      ['dlq', 'list', dead, '--count', '0'],
      ['dlq', 'list', dead, '--count', 'many'],
      ['dlq', 'list', dead, '--after', 'yesterday'],
      ['dlq', 'redrive', dead],
      ['dlq', 'redrive', dead, 'not-an-id'],
      ['dlq', 'delete', dead],
      ['consumers', 'prune', 'orders'],
      ['pending', 'peek', 'orders', '1-1'],
      ['pending', 'peek', 'orders', '--group', 'g'],
    ];
    // 15 processes: run at once, as one after another they outlasted the test's timeout on a loaded CI.
    const runs = await Promise.all(
      usage.map(async (args) => ({
        args,
        code: (await cli(...args)).code,
        alone: args[0] === 'dlq' ? (await dlqCli(...args.slice(1))).code : 2,
      })),
    );
    expect(runs).toEqual(usage.map((args) => ({ args, code: 2, alone: 2 })));
  }, 60_000);

  it('consumers prune names every missing flag, the first one first', async () => {
    const run = await cli('consumers', 'prune', 'orders');
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/consumers prune needs --group G and --idle-ms MS/);
  });
});

describe('operator CLI: deleting dead letters', () => {
  it('dlq delete deletes the given letters and says which were not there', async () => {
    const { key, dead, letters } = await scene();
    const run = await cli('dlq', 'delete', dead, letters[0]!, '9-9');
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`${letters[0]} deleted`);
    expect(run.stdout).toContain('9-9 not in');
    expect(await redis.client().xlen(dead)).toBe(1);
    expect((await cli('dlq', 'delete', key, '1-1')).code).toBe(2);
    expect(await redis.client().xlen(key)).toBe(3);
  });

  it('dlq delete --all says how many it would delete and deletes nothing without --yes', async () => {
    const { key, dead } = await scene();
    const asked = await cli('dlq', 'delete', dead, '--all');
    expect(asked.code).toBe(2);
    expect(asked.stderr).toContain(`delete --all deletes 2 dead letters of "${dead}": add --yes`);
    expect(await redis.client().xlen(dead)).toBe(2);
    const done = await cli('dlq', 'delete', dead, '--all', '--yes', '--json');
    expect(done.code).toBe(0);
    expect(JSON.parse(done.stdout)).toEqual({ stream: dead, deleted: 2 });
    expect(await redis.client().xlen(dead)).toBe(0);
    expect((await cli('dlq', 'delete', key, '--all', '--yes')).code).toBe(2);
    expect(await redis.client().xlen(key)).toBe(3);
  });
});

describe('operator CLI: a stuck pending entry', () => {
  it('pending peek shows its payload (escaped), owner, idle and deliveries', async () => {
    const { key, ids } = await scene();
    const json = await cli('pending', 'peek', key, '--group', 'g', ids[0]!, '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({ stream: key, group: 'g', id: ids[0], owner: 'stuck', deliveries: 1 });
    // The binary once: a command that exits once done.
    const text = await runCliProcess(redis, ['pending', 'peek', key, '--group', 'g', ids[0]!]);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`${ids[0]}  owner stuck  idle .*  deliveries 1`));
    expect(text.stdout).not.toContain('\u001b');
    const notPending = await cli('pending', 'peek', key, '--group', 'g', ids[1]!);
    expect(notPending.code).toBe(1);
    expect(notPending.stderr).toContain(`${ids[1]} is not pending in group "g"`);
  });

  it('pending release makes it reclaimable by the next peer at once, owner and delivery count unchanged', async () => {
    const { key, ids } = await scene();
    const run = await cli('pending', 'release', key, '--group', 'g', ids[0]!, '--min-idle-ms', '60000');
    expect(run.code).toBe(0);
    const [, owner, idle, count] = (
      (await redis.client().xpending(key, 'g', ids[0]!, ids[0]!, 1)) as [string, string, number, number][]
    )[0]!;
    expect([owner, count]).toEqual(['stuck', 1]);
    expect(idle).toBeGreaterThanOrEqual(60_000);
    const [, claimed] = (await redis.client().xautoclaim(key, 'g', 'peer', 60_000, '0-0', 'COUNT', 10)) as [string, [string, string[]][]];
    expect(claimed.map(([id]) => id)).toEqual([ids[0]]);
  });

  it('pending dead-letter moves it to the dead-letter stream and acks it, in one step', async () => {
    const { key, dead, ids } = await scene();
    const run = await cli('pending', 'dead-letter', key, '--group', 'g', ids[0]!, '--json');
    expect(run.code).toBe(0);
    const { deadLetterId } = JSON.parse(run.stdout) as { deadLetterId: string };
    const [, fields] = (await redis.client().xrange(dead, deadLetterId, deadLetterId))[0]!;
    const letter = Object.fromEntries(Array.from({ length: fields.length / 2 }, (_, i) => [fields[2 * i], fields[2 * i + 1]]));
    expect(letter).toMatchObject({ stream: key, sourceId: ids[0], group: 'g', consumer: 'stuck', deliveryCount: '1' });
    expect(JSON.parse(letter.fields!)).toEqual(['data', '{"note":"\u001b[31mred"}']);
    expect(await redis.client().xpending(key, 'g', '-', '+', 10)).toEqual([]);
    expect((await cli('pending', 'dead-letter', key, '--group', 'g', ids[0]!)).code).toBe(1);
  });
});

describe('operator CLI: inspect says what needs attention', () => {
  it('flags an entry idle past --min-idle-ms that nobody reclaimed, a consumer without a connection that owns entries, and dead letters', async () => {
    const { key, dead, ids } = await scene();
    const json = await cli('inspect', key, '--min-idle-ms', '1', '--json');
    const [report] = JSON.parse(json.stdout) as { attention: string[] }[];
    expect(report!.attention).toEqual(
      expect.arrayContaining([
        expect.stringContaining(`entry ${ids[0]} held by "stuck"`),
        expect.stringContaining('"stuck" owns 1 pending entry but has no connection: it waits'),
        expect.stringContaining(`2 dead letters in "${dead}"`),
      ]),
    );
    const text = await cli('inspect', key, '--min-idle-ms', '1');
    expect(text.stdout).toContain(`  attention: entry ${ids[0]} held by "stuck"`);
    // One unit per figure, as the rest of the report words it: never "idle 751511 ms" beside "12.5 min".
    expect(text.stdout).toMatch(/held by "stuck" in group "g" idle \d+(\.\d)? (ms|s|min), past minIdleMs 1 ms: /);
    expect(text.stdout).toContain(`  dead letters: ${dead} 2`);
  });

  it('--watch flags a dead-letter stream that grew and a lag that rose since the last refresh', async () => {
    const { key, dead } = await scene();
    const script = requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
    const target = redis.cluster ? ['--cluster', (redis.connection as string[]).join(',')] : ['--url', redis.url];
    const child = execFile(
      process.execPath,
      [script, 'inspect', key, '--watch', '--interval', '500', '--times', '3', '--json', ...target],
      {
        cwd: repoRoot,
      },
    );
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    await waitFor(() => out.split('\n').filter(Boolean).length >= 1, { message: 'the first frame' });
    await redis.client().xadd(dead, '*', 'stream', key, 'sourceId', '1-9', 'error', 'boom', 'fields', '[]', 'deadAt', '1');
    await redis.client().xadd(key, '*', 'n', '3');
    expect(await exited).toBe(0);
    const frames = out
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { streams: { attention: string[] }[] });
    const later = frames.slice(1).flatMap((f) => f.streams[0]!.attention);
    expect(later).toEqual(expect.arrayContaining([`"${dead}" grew by 1 dead letter`, 'lag of group "g" rose from 2 to 3']));
    expect(frames[0]!.streams[0]!.attention.some((a) => a.includes('grew') || a.includes('rose'))).toBe(false);
  });
});

describe('operator CLI: review findings', () => {
  it('field sniffing never authorises deletion: a work stream whose entries look like letters is not emptied', async () => {
    const key = `${uniquePrefix()}orders`;
    const r = redis.client();
    await r.xadd(key, '*', 'stream', 'x', 'sourceId', '1-1', 'error', 'e');
    const id = (await r.xadd(key, '*', 'n', '1'))!;
    for (const args of [
      ['dlq', 'delete', key, '--all', '--yes'],
      ['dlq', 'delete', key, id],
      ['dlq', 'redrive', key, '--all', '--to', `${key}-x`],
    ]) {
      const run = await cli(...args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toContain('--custom-dlq');
    }
    expect(await r.xlen(key)).toBe(2);
  });

  it('a custom-named dead-letter stream is acted on with --custom-dlq, and refused without a made-up suggestion', async () => {
    const key = `${uniquePrefix()}orders`;
    const custom = `${key}-letters`;
    const r = redis.client();
    await r.xadd(custom, '*', 'note', 'not a letter');
    await r.xadd(custom, '*', 'stream', key, 'sourceId', '1-1', 'error', 'x', 'fields', '[]', 'deadAt', '1');
    const refused = await cli('dlq', 'list', custom);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--custom-dlq');
    expect(refused.stderr).not.toContain('did you mean');
    expect((await cli('dlq', 'list', custom, '--custom-dlq', '--json')).code).toBe(0);
    const done = await cli('dlq', 'delete', custom, '--all', '--yes', '--custom-dlq', '--json');
    expect(done.code).toBe(0);
    expect(await r.xlen(custom)).toBe(0);
  });

  it('ids together with --all are a usage error (exit 2), nothing deleted or re-driven', async () => {
    const { key, dead, letters } = await scene();
    for (const args of [
      ['dlq', 'delete', dead, letters[0]!, '--all', '--yes'],
      ['dlq', 'redrive', dead, letters[0]!, '--all', '--to', key],
    ]) {
      const run = await cli(...args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
    }
    expect(await redis.client().xlen(dead)).toBe(2);
  });

  it('dlq usage errors are usage errors (exit 2, the usage) before any connection: the same with a server that refuses it', async () => {
    // A port nobody listens on: a usage error must not wait for, or be hidden by, the connection.
    const nowhere = 'redis://127.0.0.1:1';
    for (const args of [
      ['list', 'x:dead', '--count', 'abc'],
      ['list', 'x:dead', '--count', '0'],
      ['list', 'x:dead', '--after', 'nope'],
      ['redrive', 'x:dead', '1-0', '--all'],
      ['redrive', 'x:dead'],
      ['delete', 'x:dead'],
    ]) {
      for (const [bin, argv] of [
        ['redis-streams', ['dlq', ...args]],
        ['redis-streams-dlq', args],
      ] as const) {
        const run = await runCli(redis, [...argv, '--url', nowhere], bin);
        expect({ argv, code: run.code }).toEqual({ argv, code: 2 });
        expect(run.stderr).not.toContain('cannot connect');
      }
    }
  });

  it('dlq find names a dead-letter key of another type instead of failing on it', async () => {
    const key = `${uniquePrefix()}payments`;
    await redis.client().hset(deadLetterKey(key), 'oops', '1');
    const run = await cli('dlq', 'find', key);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`${deadLetterKey(key)}  not a stream (hash): nothing can be dead-lettered there`);
  });

  it('pending dead-letter and release refuse an entry whose owner is connected (still handling it) unless --force', async () => {
    let finish!: () => void;
    const handling = new Promise<void>((resolve) => (finish = resolve));
    const app = await start({ connection: redis.connection, group: 'g', consumer: 'busy', keyPrefix: uniquePrefix(), blockMs: 1000 });
    app.recorder.behavior = () => handling;
    try {
      const key = app.key();
      const id = (await redis.client().xadd(key, '*', 'data', '{}'))!;
      await waitFor(() => app.recorder.calls.length === 1, { message: 'the handler to start' });
      for (const sub of ['dead-letter', 'release']) {
        const run = await cli('pending', sub, key, '--group', 'g', id);
        expect({ sub, code: run.code }).toEqual({ sub, code: 1 });
        expect(run.stderr).toContain('"busy" has a connection open');
        expect(run.stderr).toContain('--force');
      }
      expect(await redis.client().xlen(deadLetterKey(key))).toBe(0);
      expect((await cli('pending', 'release', key, '--group', 'g', id, '--force')).code).toBe(0);
    } finally {
      finish();
    }
  });

  it('pending dead-letter refuses a --to that is not a dead-letter stream, and an entry gone from the stream, unless told', async () => {
    const { key, dead, ids } = await scene();
    const r = redis.client();
    const toWork = await cli('pending', 'dead-letter', key, '--group', 'g', ids[0]!, '--to', key);
    expect(toWork.code).toBe(2);
    expect(toWork.stderr).toContain('--custom-dlq');
    expect(await r.xlen(key)).toBe(3);
    await r.xdel(key, ids[0]!);
    const gone = await cli('pending', 'dead-letter', key, '--group', 'g', ids[0]!);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('no longer in the stream');
    expect(await r.xlen(dead)).toBe(2);
    expect((await cli('pending', 'dead-letter', key, '--group', 'g', ids[0]!, '--force')).code).toBe(0);
    expect(await r.xlen(dead)).toBe(3);
  });

  it('an id out of range is a usage error', async () => {
    const { key, dead } = await scene();
    for (const args of [
      ['dlq', 'delete', dead, '99999999999999999999-0'],
      ['dlq', 'list', dead, '--after', '1-99999999999999999999'],
      ['pending', 'peek', key, '--group', 'g', '99999999999999999999-0'],
    ]) {
      const run = await cli(...args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
    }
  });

  it('a dead-letter key of another type is named in the failure', async () => {
    const hash = `${uniquePrefix()}orders:dead`;
    await redis.client().hset(hash, 'a', '1');
    const wrong = await cli('dlq', 'list', hash);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain(`"${hash}"`);
    expect(wrong.stderr).toContain('WRONGTYPE');
  });

  it("parseArgs' messages keep their own line breaks", async () => {
    const ambiguous = await cli('inspect', 'orders', '--min-idle-ms', '-5');
    expect(ambiguous.code).toBe(2);
    expect(ambiguous.stderr).not.toContain('\\x0a');
    expect(ambiguous.stderr.split('\n')[1]).toMatch(/^Did you forget/);
  });
});

// No server involved: the one-node pass covers it.
describe.skipIf(CLUSTER_MODE)('operator CLI: usage and help, per command', () => {
  /** The lines after the error line and the blank one: what a usage error shows besides the error. */
  const shown = (stderr: string) => stderr.trimEnd().split('\n').slice(2);

  it("a usage error prints one line and that command's usage, not the whole help", async () => {
    for (const [args, command] of [
      [['dlq', 'list'], 'dlq'],
      [['inspect', '--bogus'], 'inspect'],
      [['pending', 'peek', 'orders', '1-1'], 'pending'],
      [['consumers', 'prune', 'orders'], 'consumers'],
      [['dashboard', 'x'], 'dashboard'],
    ] as const) {
      const run = await cli(...args);
      expect(run.code, args.join(' ')).toBe(2);
      const [error, blank] = run.stderr.split('\n');
      expect(error).toMatch(/^redis-streams: /);
      expect(blank).toBe('');
      const usage = shown(run.stderr);
      expect(usage[0]).toBe('usage:');
      expect(
        usage
          .slice(1)
          .filter((l) => /^ {2}redis-streams /.test(l))
          .every((l) => l.startsWith(`  redis-streams ${command}`)),
      ).toBe(true);
      expect(usage.length, run.stderr).toBeLessThanOrEqual(8);
    }
    // No command, or an unknown one: the commands' usage lines only.
    for (const args of [[], ['nope']]) {
      const run = await cli(...args);
      expect(run.code).toBe(2);
      expect(shown(run.stderr).length, run.stderr).toBeLessThanOrEqual(16);
      expect(run.stderr).toContain('redis-streams <command> --help');
      expect(run.stderr).not.toContain('attention:');
    }
    const dlq = await dlqCli('list');
    expect(dlq.code).toBe(2);
    expect(shown(dlq.stderr).length, dlq.stderr).toBeLessThanOrEqual(8);
  });

  it("<command> --help gives that command's help; --help alone all of it", async () => {
    const inspect = await cli('inspect', '--help');
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toMatch(/^usage:\n {2}redis-streams inspect /);
    expect(inspect.stdout).toContain('"attention:" lines');
    expect(inspect.stdout).toContain('--timeout-ms');
    expect(inspect.stdout).not.toMatch(/pending peek:|dashboard:/);
    const pending = await cli('pending', '--help');
    expect(pending.stdout).toMatch(/^usage:\n {2}redis-streams pending peek /);
    expect(pending.stdout).not.toContain('"attention:" lines');
    const all = await cli('--help');
    for (const part of ['"attention:" lines', 'pending peek:', 'dashboard:', 'consumers prune:']) expect(all.stdout).toContain(part);
    // `help <command>` as git and npm take it; `help` alone is --help.
    expect(await cli('help', 'inspect')).toEqual(inspect);
    expect(await cli('help')).toEqual(all);
  });

  it('npx redis-streams and npx redis-streams-dlq run in the repository root (npm links them at install, before a build)', async () => {
    requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
    for (const [bin, first] of [
      ['redis-streams', 'redis-streams inspect'],
      ['redis-streams-dlq', 'redis-streams-dlq find'],
    ] as const) {
      const { stdout } = await promisify(execFile)('npx', ['--no-install', bin, '--help'], { cwd: repoRoot });
      expect(stdout).toMatch(new RegExp(`^usage:\n {2}${first} `));
    }
  });
});
