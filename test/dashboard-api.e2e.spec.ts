// The dashboard's JSON API against a real Redis: what it costs Redis, what it refuses, and what one odd
// key or a frozen server does to it (the fresh-eyes review's findings, each seen failing first).
import { spawn } from 'node:child_process';
import { get as httpGet, request, type Server } from 'node:http';
import { createInterface } from 'node:readline';
import { Redis, type Cluster } from 'ioredis';
import { partitionKeys, RedisStreamsDashboardModule, serveDashboard, type DashboardServerOptions } from 'nestjs-redis-streams';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { aclUser } from './support/acl.js';
import { repoRoot, requireBuilt } from './support/built.js';
import { useBrowser } from './support/browser.js';
import { freezeServer } from './support/freeze.js';
import { deadLetterKey, retrySetKey } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { forgeDeadLetter } from './support/dead-letter.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';
import { delayedKeysOf } from '../libs/redis-streams/src/key-names.js';
import { encodeRecord } from '../libs/redis-streams/src/redis/upkeep/delayed-record.js';

const redis = useRedis();
const browser = useBrowser();
const servers: Server[] = [];
afterEach(async () => {
  // closeAllConnections: an open page polls every second over keep-alive, which close() alone would wait out.
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => (s.close(resolve), s.closeAllConnections()))));
});

async function dashboard(prefix: string, options: DashboardServerOptions = {}) {
  const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, ...options });
  servers.push(server);
  return {
    url,
    get: async (path: string, headers: Record<string, string> = {}) => {
      const res = await fetch(`${url}${path}`, { headers });
      return { status: res.status, body: (await res.json()) as any };
    },
  };
}

/** A GET sent as written, path and Host kept (fetch resolves dot segments and drops a Host it is given): the status. */
const rawStatus = (base: string, path: string, headers: Record<string, string> = {}) =>
  new Promise<number>((resolve, reject) => {
    const url = new URL(base);
    httpGet({ host: url.hostname, port: url.port, path, headers }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    }).on('error', reject);
  });

const letter = (stream: string, extra: string[] = []) => forgeDeadLetter(redis.client(), deadLetterKey(stream), stream, {}, extra);

/** Bytes Redis has sent to all its clients so far. */
const sentBytes = async () => Number(/total_net_output_bytes:(\d+)/.exec(await redis.client().info('stats'))![1]);

describe('dashboard API', () => {
  it('an entries page or a search reads a bounded number of bytes and fields inside Redis, whatever the entries weigh', async (ctx) => {
    if (redis.cluster) ctx.skip(); // one stream, one node: the bound is the script's
    const prefix = uniquePrefix();
    const big = `${prefix}big`;
    const wide = `${prefix}wide`;
    const r = redis.client();
    await r.xgroup('CREATE', big, 'g', '$', 'MKSTREAM');
    await r.xgroup('CREATE', wide, 'g', '$', 'MKSTREAM');
    // 24 entries of 1 MB, and 12 of 20,000 fields.
    const mb = 'x'.repeat(1_000_000);
    for (let i = 0; i < 24; i++) await r.xadd(big, '*', 'data', mb, 'tenant', `t${i}`);
    // A tiny entry newest: what is read first must not make the next read a large one (review finding: 50 × 2 MB at once).
    await r.xadd(big, '*', 'data', 'tiny', 'tenant', 'tiny');
    const fields = Array.from({ length: 20_000 }, (_, i) => [`f${i}`, 'v']).flat();
    for (let i = 0; i < 12; i++) await r.xadd(wide, '*', ...fields);
    const d = await dashboard(prefix);
    const commands = async () => Number(/cmdstat_xrevrange:calls=(\d+),/.exec(await r.info('commandstats'))?.[1] ?? 0);
    // The newest 20 of 1 MB each: about 2 MB of them, then a cursor for the rest.
    const list = await d.get(`api/entries?key=${encodeURIComponent(big)}&count=200`);
    expect(list.status).toBe(200);
    expect(list.body.entries.length).toBeGreaterThanOrEqual(2);
    expect(list.body.entries.length).toBeLessThanOrEqual(4);
    expect(list.body.read).toBe(list.body.entries.length);
    expect(list.body.next).toBe(list.body.entries.at(-1).id);
    // A search that matches nothing reads no more than that budget either (not its window of 1,000).
    const before = await commands();
    const search = await d.get(`api/entries?key=${encodeURIComponent(big)}&count=20&field=tenant&value=nowhere`);
    expect(search.body.entries).toEqual([]);
    expect(search.body.read).toBeLessThanOrEqual(4);
    expect(search.body.next).not.toBeNull();
    expect((await commands()) - before).toBeLessThanOrEqual(4);
    // Wide entries: at most about 40,000 fields read, each entry's field count said, its first 100 fields shown.
    const w = await d.get(`api/entries?key=${encodeURIComponent(wide)}&count=20`);
    expect(w.body.read).toBeLessThanOrEqual(3);
    expect(w.body.entries[0]).toMatchObject({ fieldCount: 20_000, truncated: true });
    expect(w.body.entries[0].fields).toHaveLength(100);
    expect(w.body.entries[0].sizes).toHaveLength(100);
    // Paging on from the cursor reaches the oldest.
    let next = list.body.next as string | null;
    let seen = list.body.entries.length as number;
    while (next) {
      const page = await d.get(`api/entries?key=${encodeURIComponent(big)}&count=20&before=${next}`);
      seen += page.body.entries.length;
      next = page.body.next;
    }
    expect(seen).toBe(25);
    // A search paged to the oldest shows every match once (review finding: a page that stopped inside the last,
    // short read said it had reached the oldest, and the rest of the matches were never shown).
    const tiny = `${prefix}tiny`;
    await r.xgroup('CREATE', tiny, 'g', '$', 'MKSTREAM');
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) ids.push((await r.xadd(tiny, '*', 'data', i % 3 ? 'hit' : 'miss'))!);
    for (const count of [1, 7, 20]) {
      const found: string[] = [];
      let before: string | null = null;
      do {
        const page = await d.get(
          `api/entries?key=${encodeURIComponent(tiny)}&count=${count}&field=data&value=hit${before ? `&before=${before}` : ''}`,
        );
        found.push(...page.body.entries.map((e: { id: string }) => e.id));
        before = page.body.next;
      } while (before);
      expect([count, found]).toEqual([count, ids.filter((_, i) => i % 3).reverse()]);
    }
  });

  it('a delayed entry of 50 MB is never read by the delayed list or its own page: it is shown by its size', async (ctx) => {
    if (redis.cluster) ctx.skip(); // one stream's keys, one node: the bound is the script's
    const prefix = uniquePrefix();
    const stream = `${prefix}reminders`;
    const r = redis.client();
    await r.xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const keys = delayedKeysOf(stream, false);
    const size = 50 * 1024 * 1024;
    // Built inside Redis (a record of the current format, field data), due first; a small one due after it.
    await r.eval(
      `local big = string.rep('x', tonumber(ARGV[2]))
       redis.call('HSET', KEYS[2], ARGV[1], '\0RSD1' .. '0:' .. '4:data' .. #big .. ':' .. big)
       redis.call('ZADD', KEYS[1], 4000000000000, ARGV[1])`,
      2,
      keys.schedule,
      keys.entries,
      'big',
      size,
    );
    await r.hset(keys.entries, 'small', encodeRecord(['data', '{"n":1}']));
    await r.zadd(keys.schedule, 4000000000001, 'small');
    const d = await dashboard(prefix);
    const scriptUsec = async () => Number(/cmdstat_evalsha:calls=\d+,usec=(\d+),/.exec(await r.info('commandstats'))?.[1] ?? 0);
    await r.config('RESETSTAT');
    const before = await sentBytes();
    const list = await d.get(`api/delayed?key=${encodeURIComponent(stream)}`);
    const one = await d.get(`api/delayed-entry?key=${encodeURIComponent(stream)}&id=big`);
    const sent = (await sentBytes()) - before;
    console.log(`a 50 MB delayed record: the list and its page cost Redis ${await scriptUsec()} µs of scripts, ${sent} bytes sent`);
    expect(list.status).toBe(200);
    const recordBytes = size + '\0RSD1'.length + '0:4:data'.length + `${size}:`.length;
    expect(list.body.entries.map((e: any) => [e.id, e.bytes, e.fields])).toEqual([
      ['big', recordBytes, null],
      ['small', expect.any(Number), ['data', '{"n":1}']],
    ]);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: 'big', bytes: recordBytes, fields: null });
    expect(sent).toBeLessThan(20_000);
  });

  it('a pending entry deleted from its stream: release and retry-now refuse (Redis would drop it unhandled), dead-letter writes an empty letter only when forced', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const r = redis.client();
    await r.xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const id = (await r.xadd(stream, '*', 'data', '{}'))!;
    await r.xreadgroup('GROUP', 'g', 'gone-worker', 'COUNT', 1, 'STREAMS', stream, '>');
    await r.zadd(retrySetKey(stream, 'g'), Date.now() + 3_600_000, id);
    await r.xdel(stream, id);
    const d = await dashboard(prefix, { actionsPassword: 'pw', logger: { log: () => {} } });
    const act = async (what: string, empty?: boolean) => {
      const res = await fetch(`${d.url}api/pending/${what}`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}`,
          'content-type': 'application/json',
          'x-requested-by': 'redis-streams-dashboard',
        },
        body: JSON.stringify({ key: stream, group: 'g', id, ...(empty ? { empty } : {}) }),
      });
      return { status: res.status, body: (await res.json()) as { reason?: string; error?: string } };
    };
    for (const what of ['release', 'retry-now']) {
      const refused = await act(what);
      expect(refused).toMatchObject({ status: 409, body: { reason: 'gone' } });
      expect(refused.body.error).toMatch(/no longer in the stream/);
    }
    expect(await r.xpending(stream, 'g', '-', '+', 10)).toHaveLength(1);
    expect((await act('dead-letter')).body.reason).toBe('gone');
    expect((await act('dead-letter', true)).status).toBe(200);
    const letter = (await r.xrange(deadLetterKey(stream), '-', '+'))[0]![1];
    expect(letter).toEqual(expect.arrayContaining(['sourceId', id, 'fields', '[]']));
    expect(await r.xpending(stream, 'g', '-', '+', 10)).toHaveLength(0);
  });

  it('an action whose body never comes is late for that, and says nothing was done (not that Redis may still do it)', async () => {
    const prefix = uniquePrefix();
    await redis.client().xgroup('CREATE', `${prefix}orders`, 'g', '$', 'MKSTREAM');
    const d = await dashboard(prefix, { requestTimeoutMs: 300, actionsPassword: 'pw' });
    const url = new URL(d.url);
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: '/api/pause',
          method: 'POST',
          headers: {
            authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}`,
            'content-type': 'application/json',
            'x-requested-by': 'redis-streams-dashboard',
            'content-length': '100',
          },
        },
        (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        },
      );
      req.on('error', reject);
      // Ten of the hundred bytes it announced: the rest never comes.
      req.write('{"key":"x"');
    });
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toEqual({ error: "the request's body did not come within 300 ms: nothing was done" });
  });

  it('a request path that is no URL gets 404, and the dashboard goes on serving', async () => {
    const { url, get } = await dashboard(uniquePrefix());
    // `//`, `//[/`: what new URL(path, base) refuses (a protocol-relative URL with no valid host).
    for (const path of ['//', '//[/', '//:99999/', '//a:b@/'])
      expect([path, await rawStatus(url, path, { host: 'evil.test' })]).toEqual([path, 404]);
    expect((await get('api/overview')).status).toBe(200);
  });

  it('large entries cost what is shown: the overview, the stream, an entry and a dead-letter page send no payload whole', async (ctx) => {
    // INFO stats of one server: on a cluster it would be any node's.
    if (redis.cluster) return ctx.skip();
    const prefix = uniquePrefix();
    const stream = `${prefix}big`;
    const big = 'x'.repeat(2_000_000);
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    for (let i = 0; i < 3; i++) await redis.client().xadd(stream, '*', 'data', big);
    await letter(stream, ['pad', big]);
    const id = (await redis.client().xrange(stream, '-', '+', 'COUNT', 1))[0]![0];
    const d = await dashboard(prefix);
    const before = await sentBytes();
    const overview = await d.get('api/overview');
    expect(overview.body.streams[0].groups[0]).toMatchObject({ lag: 3, pending: 0 });
    expect((await d.get(`api/stream?key=${encodeURIComponent(stream)}`)).status).toBe(200);
    const entry = await d.get(`api/entry?key=${encodeURIComponent(stream)}&id=${id}`);
    expect(entry.body).toMatchObject({ truncated: true, sizes: [[4, 2_000_000]] });
    expect(entry.body.fields[0][1]).toHaveLength(2_000);
    const dead = await d.get(`api/dead-letters?key=${encodeURIComponent(deadLetterKey(stream))}`);
    expect(dead.body.letters).toHaveLength(1);
    // Four entries of 2 MB are in play; everything Redis sent for the four calls is a small part of one.
    expect((await sentBytes()) - before).toBeLessThan(200_000);
  });

  it('a dead-letter key of another type is flagged on its stream; the overview still shows every stream', async () => {
    const prefix = uniquePrefix();
    for (const name of ['a', 'b']) await redis.client().xgroup('CREATE', `${prefix}${name}`, 'g', '$', 'MKSTREAM');
    await redis.client().set(deadLetterKey(`${prefix}a`), 'not a stream');
    const overview = await dashboard(prefix).then((d) => d.get('api/overview'));
    expect(overview.status).toBe(200);
    expect(overview.body.streams.map((s: { stream: string }) => s.stream)).toEqual([`${prefix}a`, `${prefix}b`]);
    expect(overview.body.attention).toEqual([expect.stringContaining(`"${deadLetterKey(`${prefix}a`)}" is not a stream`)]);
  });

  it("entries waiting for a retry are flagged on the overview, with the group's retry counts", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const id = (await redis.client().xadd(stream, '*', 'data', '{}'))!;
    await redis.client().xreadgroup('GROUP', 'g', 'c1', 'COUNT', 1, 'STREAMS', stream, '>');
    // A retry record as a worker's retry policy writes one: due in a minute, on Redis' clock.
    const [seconds] = (await redis.client().time()) as [number, number];
    await redis.client().zadd(retrySetKey(stream, 'g'), seconds * 1000 + 60_000, id);
    const overview = await dashboard(prefix).then((d) => d.get('api/overview'));
    expect(overview.body.streams[0].groups[0].retries).toEqual({ waiting: 1, due: 0 });
    expect(overview.body.attention).toContain(`${stream}: 1 entry of group "g" waits for a retry`);
  });

  it('produced and consumed rates between two refreshes, and their history for the sparklines', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const d = await dashboard(prefix);
    const first = await d.get('api/overview');
    expect(first.body.streams[0]).toMatchObject({ producedPerSec: null, producedHistory: [] });
    for (let i = 0; i < 5; i++) await redis.client().xadd(stream, '*', 'data', '{}');
    await redis.client().xreadgroup('GROUP', 'g', 'c1', 'COUNT', 3, 'STREAMS', stream, '>');
    // Past the window in which refreshes share one read (0.5 s): waited for on the dashboard's own clock of refreshes.
    // Read from that refresh itself: a later one (past the window, on a loaded machine) rates an idle interval at 0.
    const { streams } = await waitFor(
      async () => {
        const { body } = await d.get('api/overview');
        return body.streams[0].producedHistory.length === 1 && body;
      },
      { message: 'a second refresh' },
    );
    expect(streams[0].producedPerSec).toBeGreaterThan(0);
    expect(streams[0].groups[0].consumedPerSec).toBeGreaterThan(0);
    expect(streams[0].groups[0].consumedHistory).toHaveLength(1);
  });

  it('a trim or a re-created group is no consumption: a group that read nothing shows none', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    for (let i = 0; i < 200; i += 100) {
      const p = redis.client().pipeline();
      for (let j = 0; j < 100; j++) p.xadd(stream, '*', 'data', '{}');
      await p.exec();
    }
    await redis.client().xgroup('CREATE', stream, 'g', '0');
    const d = await dashboard(prefix);
    await d.get('api/overview');
    await redis.client().xtrim(stream, 'MAXLEN', 20);
    await waitFor(async () => (await d.get('api/overview')).body.streams[0].producedHistory.length === 1, { message: 'a second refresh' });
    const group = (await d.get('api/overview')).body.streams[0].groups[0];
    expect([group.consumedPerSec ?? 0, ...group.consumedHistory]).toEqual([0, ...group.consumedHistory.map(() => 0)]);
  });

  it('pages: the overview and the dead-letter streams past the first page are reachable', async () => {
    const prefix = uniquePrefix();
    for (const name of ['a', 'b', 'c']) {
      await redis.client().xgroup('CREATE', `${prefix}${name}`, 'g', '$', 'MKSTREAM');
      await letter(`${prefix}${name}`);
    }
    const d = await dashboard(prefix, { pageSize: 2 });
    const second = await d.get('api/overview?page=1');
    expect(second.body).toMatchObject({ total: 3, page: 1 });
    expect(second.body.streams.map((s: { stream: string }) => s.stream)).toEqual([`${prefix}c`]);
    const dead = await d.get('api/dead-letter-streams?page=1');
    expect(dead.body.streams).toEqual([{ stream: deadLetterKey(`${prefix}c`), length: 1 }]);
  });

  it('answers only its own Host names (DNS rebinding) and only keys its match names', async () => {
    const prefix = uniquePrefix();
    const other = uniquePrefix();
    for (const key of [`${prefix}orders`, `${other}pay`]) await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
    await letter(`${other}pay`);
    const d = await dashboard(prefix, { actionsPassword: 'pw' });
    const auth = { authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}` };
    expect(await rawStatus(d.url, '/api/overview', { ...auth, host: 'evil.example:80' })).toBe(421);
    expect((await d.get('api/overview', auth)).status).toBe(200);
    expect((await d.get(`api/stream?key=${encodeURIComponent(`${other}pay`)}`, auth)).status).toBe(400);
    expect((await d.get(`api/dead-letters?key=${encodeURIComponent(deadLetterKey(`${other}pay`))}`, auth)).status).toBe(400);
    const id = (await redis.client().xrange(deadLetterKey(`${other}pay`), '-', '+'))[0]![0];
    const deleted = await fetch(`${d.url}api/dead-letters/delete`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
      body: JSON.stringify({ key: deadLetterKey(`${other}pay`), ids: [id] }),
    });
    expect(deleted.status).toBe(400);
    expect(await redis.client().xlen(deadLetterKey(`${other}pay`))).toBe(1);
  });

  it('refuses bad input with 400 (never 500), HEAD with 405, and an empty actions password', async () => {
    const prefix = uniquePrefix();
    const stream = encodeURIComponent(`${prefix}orders`);
    await redis.client().xgroup('CREATE', `${prefix}orders`, 'g', '$', 'MKSTREAM');
    const d = await dashboard(prefix);
    for (const path of [
      `api/pending?key=${stream}&group=g&count=0`,
      `api/pending?key=${stream}&group=g&after=nope`,
      `api/entry?key=${stream}&id=1-x`,
    ]) {
      const answer = await d.get(path);
      expect([path, answer.status]).toEqual([path, 400]);
    }
    expect((await fetch(`${d.url}api/overview`, { method: 'HEAD' })).status).toBe(405);
    await expect(serveDashboard(redis.client(), { port: 0, actionsPassword: '' })).rejects.toThrow(/actionsPassword/);
    // An audit logger without log(): every action's line would be lost (review-z).
    await expect(serveDashboard(redis.client(), { port: 0, logger: console.log as never })).rejects.toThrow(
      /invalid option "dashboard\.logger": must be an object with a log\(\) method/,
    );
  });

  it('an audit logger that throws: the action done answers 200, its line goes to stderr (review-y)', async () => {
    const prefix = uniquePrefix();
    await redis.client().xgroup('CREATE', `${prefix}orders`, 'g', '$', 'MKSTREAM');
    const d = await dashboard(prefix, {
      actionsPassword: 'pw',
      logger: {
        log: () => {
          throw new Error('audit sink down');
        },
      },
    });
    const stderr: string[] = [];
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
    let status: number;
    try {
      // Before: 500 {"error":"audit sink down"} for a pause that was applied.
      status = (
        await fetch(`${d.url}api/pause`, {
          method: 'POST',
          headers: {
            authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}`,
            'content-type': 'application/json',
            'x-requested-by': 'redis-streams-dashboard',
          },
          body: JSON.stringify({ key: `${prefix}orders`, group: 'g' }),
        })
      ).status;
    } finally {
      write.mockRestore();
    }
    expect(status).toBe(200);
    expect(stderr).toEqual([
      expect.stringMatching(/^\[nestjs-redis-streams\] the logger threw \(audit sink down\); its line: dashboard: "ops" paused/),
    ]);
  });

  it('a frozen Redis: each call gets 503 at its deadline instead of hanging the page', async (ctx) => {
    if (!redis.owned) return ctx.skip();
    const prefix = uniquePrefix();
    await redis.client().xgroup('CREATE', `${prefix}orders`, 'g', '$', 'MKSTREAM');
    const d = await dashboard(prefix, { requestTimeoutMs: 300, actionsPassword: 'pw' });
    const auth = { authorization: `Basic ${Buffer.from('ops:pw').toString('base64')}` };
    const thaw = await freezeServer(redis.client());
    try {
      const answer = await d.get('api/overview', auth);
      expect(answer).toEqual({ status: 503, body: { error: 'Redis did not answer within 300 ms' } });
      // An action past its deadline is no refusal: Redis may still carry it out once it answers (review finding).
      const action = await fetch(`${d.url}api/pause`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
        body: JSON.stringify({ key: `${prefix}orders`, group: 'g' }),
      });
      expect(action.status).toBe(503);
      expect(await action.json()).toEqual({
        error: 'Redis did not answer within 300 ms: the action may still be carried out once it answers; look before trying again',
        outcome: 'unknown',
      });
    } finally {
      thaw();
    }
    // Answering again once thawed (the first call after a thaw may still meet the 300 ms deadline on a busy machine).
    await waitFor(async () => (await d.get('api/overview', auth)).status === 200, { message: 'an answer after the thaw' });
  });

  it('the page script is the same self-contained code from the CommonJS build as from the ES one (no require, no exports in it)', async () => {
    const path = (build: string) => requireBuilt(`libs/redis-streams/dist/${build}/dashboard/app-script.js`);
    const cjs = (createRequire(import.meta.url)(path('cjs')) as { APP_SCRIPT: string }).APP_SCRIPT;
    const esm = ((await import(pathToFileURL(path('esm')).href)) as { APP_SCRIPT: string }).APP_SCRIPT;
    expect(cjs).toBe(esm);
    expect(cjs).not.toMatch(/\brequire\(|\bexports\.|_\d+\./);
    // A classic script (CSP 'self', loaded without type="module"): no import or export left in it.
    expect(cjs).not.toMatch(/^\s*(import|export)\b/m);
    // It parses as a classic script (only parsed: there is no DOM here).
    expect(() => new Function(cjs)).not.toThrow();
  });

  it('on a Redis Cluster: every partition of a partitioned stream, each with the master that serves it', async (ctx) => {
    if (!redis.cluster) return ctx.skip();
    const prefix = uniquePrefix();
    const keys = partitionKeys(prefix, 'orders', 6);
    for (const key of keys) await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
    const overview = await dashboard(prefix).then((d) => d.get('api/overview'));
    const shown = (overview.body.streams as { stream: string; node: string }[]).map((s) => [s.stream, s.node] as const);
    expect(shown.map(([key]) => key)).toEqual([...keys].sort());
    const masters = (redis.client() as unknown as Cluster).nodes('master');
    for (const [key, node] of shown) {
      const master = masters.find((n) => `${n.options.host}:${n.options.port}` === node);
      expect([key, await master?.exists(key)]).toEqual([key, 1]);
    }
    expect(new Set(shown.map(([, node]) => node)).size).toBeGreaterThan(1);
  });

  it('bounds what one stream or entry can make it send, and says which stream it could not read', async (ctx) => {
    if (redis.cluster) return ctx.skip();
    const prefix = uniquePrefix();
    const wide = `${prefix}wide`;
    await redis.client().xgroup('CREATE', wide, 'g', '$', 'MKSTREAM');
    for (let i = 0; i < 150; i++) await redis.client().xgroup('CREATECONSUMER', wide, 'g', `c${i}`);
    const parts = Array.from({ length: 600 }, (_, i) => `f${i}`);
    const id = (await redis.client().xadd(wide, '*', ...parts))!;
    // A key the dashboard's user may not read, among those its match names.
    await redis.client().xgroup('CREATE', `${prefix}secret`, 'g', '$', 'MKSTREAM');
    const user = await aclUser(redis.client(), redis.port, `dash-${prefix.slice(2, 10)}`, prefix, ['on', '>pw', `~${prefix}w*`, '+@all']);
    const limited = new Redis(user);
    try {
      const { server, url } = await serveDashboard(limited, { port: 0, match: `${prefix}*` });
      servers.push(server);
      const get = async (path: string) => {
        const res = await fetch(`${url}${path}`);
        return { status: res.status, body: (await res.json()) as any };
      };
      const overview = await get('api/overview');
      expect(overview.status).toBe(200);
      expect(overview.body.streams.map((x: { stream: string }) => x.stream)).toEqual([wide]);
      // The stream it may not read, and the dead-letter name it may not read (a cluster's {…}:dead): said, the rest shown.
      expect(overview.body.attention).toEqual([
        expect.stringMatching(new RegExp(`^${prefix}secret: could not be read \\(NOPERM`)),
        expect.stringMatching(/^[^:]+:wide: "\{[^}]+\}:dead" could not be read \(NOPERM/),
      ]);
      const group = overview.body.streams[0].groups[0];
      expect([group.consumers.length, group.consumerCount]).toEqual([100, 150]);
      const entry = await get(`api/entry?key=${encodeURIComponent(wide)}&id=${id}`);
      expect([entry.body.fields.length, entry.body.fieldCount, entry.body.truncated]).toEqual([100, 300, true]);
      // A stream it may not read is said so (NOPERM, a refusal: 400), not called a key without a group.
      const secret = await get(`api/stream?key=${encodeURIComponent(`${prefix}secret`)}`);
      expect(secret.status).toBe(400);
      expect(secret.body.error).toMatch(/NOPERM/);
      expect((await get(`api/pending?key=${encodeURIComponent(wide)}&group=nogroup`)).status).toBe(400);
      expect((await get(`api/entry?key=${encodeURIComponent(wide)}&id=99999999999999999999-0`)).status).toBe(400);
    } finally {
      limited.disconnect();
    }
  });

  it('on a Redis Cluster, the standalone command: its cluster page lists every partition under the master that serves it', async (ctx) => {
    if (!redis.cluster) return ctx.skip();
    const prefix = uniquePrefix();
    const keys = partitionKeys(prefix, 'orders', 6);
    for (const key of keys) await redis.client().xgroup('CREATE', key, 'g', '$', 'MKSTREAM');
    const cli = requireBuilt('libs/redis-streams/dist/esm/cli/redis-streams.js');
    const nodes = (redis.connection as string[]).join(',');
    const proc = spawn(process.execPath, [cli, 'dashboard', '--cluster', nodes, '--port', '0', '--match', `${prefix}*`], { cwd: repoRoot });
    try {
      const lines = createInterface({ input: proc.stdout });
      let url = '';
      for await (const line of lines) {
        const m = /^dashboard: (http:\/\/\S+)/.exec(line);
        if (m) {
          url = m[1]!;
          break;
        }
      }
      const page = await browser.page();
      await page.goto(`${url}#/cluster`);
      const masters = page.getByRole('table', { name: 'Masters' });
      await masters.waitFor();
      for (const key of keys) await masters.getByRole('link', { name: key, exact: true }).waitFor();
      expect(await masters.locator('tbody tr').count()).toBeGreaterThan(1);
      await browser.shot(page, 'dashboard-cluster');
    } finally {
      proc.kill();
    }
  });

  it('names the server and what it offers, on the API and the page; counters of idempotent writes where the server has them', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const r = redis.client();
    await r.xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const [xcfgset] = (await r.call('COMMAND', 'INFO', 'XCFGSET')) as unknown[];
    const idmp = Array.isArray(xcfgset) && xcfgset.length > 0;
    // A write and its repeat (Redis 8.6).
    if (idmp) for (let i = 0; i < 2; i++) await r.call('XADD', stream, 'IDMP', 'p', 'k', '*', 'data', '{}');
    const d = await dashboard(prefix);
    const { body } = await d.get('api/overview');
    expect(body.server).toMatch(/^(Redis|Valkey) \d+\.\d+\.\d+.*: /);
    const counters = { windowSec: 100, maxKeys: 100, pidsTracked: 1, iidsTracked: 1, iidsAdded: 1, iidsDuplicates: 1 };
    expect(body.streams[0].idempotency).toEqual(idmp ? counters : null);
    const page = await browser.page();
    await page.goto(d.url);
    await page.getByText(`Server: ${body.server}`).waitFor();
    if (idmp) {
      await page.goto(`${d.url}#/stream/${encodeURIComponent(stream)}`);
      await page
        .getByText('Idempotent writes: 1 added, 1 duplicate; window 100 s, 100 keys per producer; 1 key of 1 producer tracked')
        .waitFor();
    }
  });

  it('matches the path as sent: dot segments and double slashes never reach it (a guard on the base path cannot be walked around)', async () => {
    const prefix = uniquePrefix();
    const d = await dashboard(prefix, { basePath: '/ops' });
    const status = (path: string) => rawStatus(d.url, path);
    expect(await status('/ops/api/config')).toBe(200);
    for (const path of [
      '/x/../ops/api/config',
      '/./ops/api/config',
      '//ops/api/config',
      '/ops/%2e%2e/ops/api/config',
      '/ops%2fapi/config',
      '/%6fps/api/config',
    ])
      expect([path, await status(path)]).toEqual([path, 404]);
  });

  it("the transport's health failing or hanging is the panel's error, not the page's; the module refuses a root basePath and a wrong server", async () => {
    const prefix = uniquePrefix();
    const failing = await dashboard(prefix, { consumer: { health: () => Promise.reject(new Error('health boom')) } });
    expect((await failing.get('api/consumer')).body).toEqual({ error: 'health boom' });
    expect((await failing.get('api/overview')).status).toBe(200);
    let calls = 0;
    const hanging = await dashboard(prefix, { consumer: { health: () => (calls++, new Promise(() => {})) } });
    expect((await hanging.get('api/consumer')).body).toEqual({ error: 'health() did not answer within 2000 ms' });
    // A hung call is not asked again on every refresh: the next ones wait on the same call.
    expect((await hanging.get('api/consumer')).body).toEqual({ error: 'health() did not answer within 2000 ms' });
    expect(calls).toBe(1);
    for (const basePath of ['', '/']) expect(() => RedisStreamsDashboardModule.register({ basePath })).toThrow(/"basePath"/);
    expect(() => RedisStreamsDashboardModule.register({ basePath: '/ops', server: {} as never })).toThrow(/"server"/);
  });
});
