import { Controller, Module, RequestMethod, type CanActivate, type MiddlewareConsumer, type NestModule } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { EventPattern, Payload } from '@nestjs/microservices';
import type { Server, ServerResponse } from 'node:http';
import { DeadLetterException, RedisStreamsDashboardModule, RedisStreamsServer, serveDashboard, StreamPattern } from 'nestjs-redis-streams';
import { refreshes, useBrowser } from './support/browser.js';
import { deadLetterKey } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { forgeDeadLetter } from './support/dead-letter.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';
import { within } from '../libs/redis-streams/src/within.js';

const redis = useRedis();
const browser = useBrowser();
const servers: Server[] = [];
afterEach(async () => {
  // closeAllConnections: an open page polls every second over keep-alive, which close() alone would wait out.
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => (s.close(resolve), s.closeAllConnections()))));
});

/** The standalone dashboard (what `redis-streams dashboard` serves) for this test's keys. */
async function standalone(prefix: string, actionsPassword?: string, pageSize?: number) {
  const { server, url } = await serveDashboard(redis.client(), {
    port: 0,
    match: `${prefix}*`,
    minIdleMs: 60_000,
    ...(actionsPassword ? { actionsPassword } : {}),
    ...(pageSize ? { pageSize } : {}),
  });
  servers.push(server);
  return url;
}

/** A stream with a group: `n` entries, the first `read` of them delivered to consumer c1 and left pending. */
async function backlog(stream: string, n: number, read: number) {
  const r = redis.client();
  await r.xgroup('CREATE', stream, 'g', '0', 'MKSTREAM');
  for (let i = 0; i < n; i++) await r.xadd(stream, '*', 'data', JSON.stringify({ n: i }), 'headers', '{}');
  if (read > 0) await r.xreadgroup('GROUP', 'g', 'c1', 'COUNT', read, 'STREAMS', stream, '>');
}

/** A stream with a group and one entry, and one dead letter of it. */
async function oneLetter() {
  const prefix = uniquePrefix();
  const stream = `${prefix}orders`;
  await backlog(stream, 1, 0);
  const dead = deadLetterKey(stream);
  return { prefix, stream, dead, letter: await forgeDeadLetter(redis.client(), dead, stream) };
}

/** A group's figures as XINFO GROUPS reports them. */
async function xinfoGroup(stream: string) {
  const rows = (await redis.client().xinfo('GROUPS', stream)) as unknown[][];
  const flat = rows[0]!;
  const at = (name: string) => flat[flat.indexOf(name) + 1];
  return { pending: Number(at('pending')), lag: Number(at('lag')) };
}

describe('dashboard', () => {
  it('the overview shows lag and pending as XINFO reports them, and a new entry within two refreshes', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await backlog(stream, 7, 3);
    const page = await browser.page();
    await page.goto(await standalone(prefix));
    const row = page.getByRole('row', { name: new RegExp(stream) });
    const cell = async (column: string) => {
      const headers = await page.getByRole('table', { name: 'Streams' }).locator('th').allTextContents();
      return row.locator('td').nth(headers.indexOf(column)).textContent();
    };
    await row.waitFor();
    const info = await xinfoGroup(stream);
    expect(info).toEqual({ pending: 3, lag: 4 });
    expect(await cell('Pending')).toBe(String(info.pending));
    expect(await cell('Lag')).toBe(String(info.lag));
    expect(await cell('Length')).toBe('7');
    await page.getByRole('link', { name: stream, exact: true }).click();
    await page.getByRole('table', { name: 'Pending entries of g' }).waitFor();
    const oldest = (await redis.client().xrange(stream, '-', '+', 'COUNT', 1))[0]![0];
    // Trim headroom: the oldest entry is pending, so a trim past it loses work.
    await page.getByText(`the oldest a group still needs is ${oldest}`, { exact: false }).waitFor();
    await browser.shot(page, 'dashboard-stream');
    await page.getByRole('navigation').getByRole('link', { name: 'Overview' }).click();
    await row.waitFor();

    await redis.client().xadd(stream, '*', 'data', '{}', 'headers', '{}');
    await refreshes(page);
    expect(await cell('Length')).toBe('8');
    expect(await cell('Lag')).toBe('5');
    // With two refreshes seen: rates and sparklines (the guide shows this one).
    await browser.shot(page, 'dashboard-overview');
  });

  it('renders a hostile stream name, field and dead-letter reason as text: nothing runs', async () => {
    const prefix = uniquePrefix();
    const hostile = `${prefix}<img src=x onerror="window.__pwned=1">`;
    await backlog(hostile, 0, 0);
    await redis
      .client()
      .xadd(hostile, '*', 'data', '<script>window.__pwned=2</script>', 'headers', '{"x":"<img src=y onerror=window.__pwned=3>"}');
    await redis.client().xreadgroup('GROUP', 'g', 'c1', 'COUNT', 1, 'STREAMS', hostile, '>');
    const dead = deadLetterKey(hostile);
    await forgeDeadLetter(
      redis.client(),
      dead,
      hostile,
      {
        consumer: '<b onmouseover=x>',
        error: '<img src=z onerror="window.__pwned=4">',
        fields: '["data","<script>window.__pwned=5</script>"]',
      },
      ['stack', 'Error: x\n    at <img src=s onerror="window.__pwned=6">'],
    );
    const page = await browser.page();
    const base = await standalone(prefix);
    for (const hash of ['#/', `#/stream/${encodeURIComponent(hostile)}`, `#/dead/${encodeURIComponent(dead)}`]) {
      await page.goto(`${base}${hash}`);
      await page.getByText(hostile, { exact: false }).first().waitFor();
      expect(await page.locator('#app img, #app script, #app b').count()).toBe(0);
    }
    const entryId = (await redis.client().xrange(hostile, '-', '+'))[0]![0];
    await page.goto(`${base}#/entry/${encodeURIComponent(hostile)}/${entryId}`);
    await page.getByText('<script>window.__pwned=2</script>').waitFor();
    await browser.shot(page, 'dashboard-entry');
    await page.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
    await page.getByText('<img src=z onerror="window.__pwned=4">').waitFor();
    await page.getByText('Stack', { exact: true }).click();
    await page.getByText('at <img src=s onerror="window.__pwned=6">', { exact: false }).waitFor();
    expect(await page.locator('#app img, #app script').count()).toBe(0);
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
  });

  it('pages past the first, a letter whose date is out of range, and a page that fails to load says so', async () => {
    const prefix = uniquePrefix();
    for (const name of ['a', 'b', 'c']) await backlog(`${prefix}${name}`, 1, 0);
    const dead = deadLetterKey(`${prefix}a`);
    await forgeDeadLetter(redis.client(), dead, `${prefix}a`, { error: 'far future', deadAt: '1e20', fields: '[]' });
    const base = await standalone(prefix, undefined, 2);
    const page = await browser.page();
    await page.goto(base);
    await page.getByRole('row', { name: new RegExp(`${prefix}b`) }).waitFor();
    expect(await page.getByRole('row', { name: new RegExp(`${prefix}c`) }).count()).toBe(0);
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByRole('row', { name: new RegExp(`${prefix}c`) }).waitFor();
    await page.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
    await page.getByText('far future').waitFor();
    await page.goto(`${base}#/stream/${encodeURIComponent(`${prefix}nothing`)}`);
    await page.getByRole('alert').filter({ hasText: 'Could not load this page' }).waitFor();
    expect(await page.getByText('far future').count()).toBe(0);
  });

  it('read-only by default: no action on the page, and the API refuses one (403)', async () => {
    const { prefix, dead, letter } = await oneLetter();
    const base = await standalone(prefix);
    const page = await browser.page();
    await page.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
    await page.getByText('Read-only: actions are off.').waitFor();
    expect(await page.getByRole('button', { name: /Redrive|Delete/ }).count()).toBe(0);
    await browser.shot(page, 'dashboard-dead-letters-read-only');
    const refused = await fetch(`${base}api/dead-letters/redrive`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
      body: JSON.stringify({ key: dead, ids: [letter] }),
    });
    expect(refused.status).toBe(403);
    expect(await redis.client().xlen(dead)).toBe(1);
  });

  it('with actions on (standalone): every page asks for the password; a cross-site action is refused even with it', async () => {
    const { prefix, dead, letter } = await oneLetter();
    const base = await standalone(prefix, 'pa55word');
    expect((await fetch(`${base}api/overview`)).status).toBe(401);
    const auth = `Basic ${Buffer.from('ops:wrong').toString('base64')}`;
    expect((await fetch(`${base}api/overview`, { headers: { authorization: auth } })).status).toBe(401);
    const good = `Basic ${Buffer.from('ops:pa55word').toString('base64')}`;
    const post = (headers: Record<string, string>) =>
      fetch(`${base}api/dead-letters/delete`, {
        method: 'POST',
        headers: { authorization: good, ...headers },
        body: JSON.stringify({ key: dead, ids: [letter] }),
      });
    // A form post from another site (no custom header, a form's content type), and a fetch from another origin.
    expect((await post({ 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(403);
    expect(
      (await post({ 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard', origin: 'http://evil.example' }))
        .status,
    ).toBe(403);
    expect(await redis.client().xlen(dead)).toBe(1);
    const done = await post({ 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' });
    expect(done.status).toBe(200);
    expect(await redis.client().xlen(dead)).toBe(0);
  });

  it('in a Nest app: a redrive from the page moves the letter back, the worker handles it, and the action is logged', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    const handled: unknown[] = [];
    let poisoned = true;
    @Controller()
    class Worker {
      @EventPattern<string>(stream)
      orders(@Payload() payload: unknown) {
        if (poisoned) throw new DeadLetterException('poisoned');
        handled.push(payload);
      }
    }
    const allow: CanActivate = { canActivate: () => true };
    const transport = new RedisStreamsServer({ connection: redis.url, group: 'g', blockMs: 50 });
    const logs: string[] = [];
    @Module({
      controllers: [Worker],
      imports: [
        RedisStreamsDashboardModule.register({
          basePath: '/ops/streams',
          connection: redis.url,
          match: `${prefix}*`,
          actions: { guard: allow, who: () => 'tester' },
          server: transport,
          logger: { log: (m) => logs.push(m) },
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    app.connectMicroservice({ strategy: transport });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    try {
      const id = await redis.client().xadd(stream, '*', 'data', JSON.stringify({ order: 1 }), 'headers', '{}');
      const dead = deadLetterKey(stream);
      await waitFor(async () => (await redis.client().xlen(dead)) === 1, { message: 'the entry dead-lettered' });
      poisoned = false;
      const page = await browser.page();
      const base = `${await app.getUrl()}/ops/streams/`.replace('[::1]', '127.0.0.1');
      // Beside the streams, this app's own consumer: running, reading the stream.
      await page.goto(base);
      const panel = page.getByRole('region', { name: "This app's consumer" });
      await panel.getByText(/in group g: running/).waitFor();
      expect(await panel.getByRole('row', { name: new RegExp(stream) }).count()).toBe(1);
      await page.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
      await page.getByText(`poisoned`, { exact: false }).first().waitFor();
      // The handler's stack, folded under its reason.
      await page.getByText('Stack', { exact: true }).click();
      await page.getByText(/^DeadLetterException: poisoned\n\s+at /).waitFor();
      await browser.shot(page, 'dashboard-dead-letters');
      const letter = (await redis.client().xrange(dead, '-', '+'))[0]![0];
      // The redrive asks first, naming how many letters and what becomes of them.
      const asked: string[] = [];
      page.on('dialog', (dialog) => void (asked.push(dialog.message()), dialog.accept()));
      await page.getByRole('checkbox', { name: `Select ${letter}` }).check();
      await page.getByRole('button', { name: 'Redrive', exact: true }).click();
      await page.getByRole('alert').filter({ hasText: 'redrove 1' }).waitFor();
      expect(asked).toEqual([expect.stringMatching(/^Redrive 1 letter of .*:dead\?\n\nEach goes back to its stream as a new entry/)]);
      await waitFor(() => handled.length === 1, { message: 'the redriven entry handled' });
      expect(handled).toEqual([{ order: 1 }]);
      expect(await redis.client().xlen(dead)).toBe(0);
      expect(logs).toEqual([expect.stringMatching(new RegExp(`"tester" redrove 1 of 1 letter of .*: ${letter}`))]);
      // A JSON array (express.json() parses it before the middleware) is no action.
      const array = await fetch(`${base}api/dead-letters/delete`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
        body: '[1]',
      });
      expect(array.status).toBe(400);
      expect(id).toBeTruthy();
      // Flow control on the stream page: a delayed entry waiting, and the group paused and resumed from the page.
      const schedule = redis.cluster ? `{${stream}}:delayed` : `${stream}:delayed`;
      await redis.client().zadd(schedule, Date.now() + 3_600_000, 'later');
      await page.goto(`${base}#/stream/${encodeURIComponent(stream)}`);
      await page.getByText(/Delayed: 1 entry waits, next due in (5\d|60)\.\d min/).waitFor();
      await page.getByRole('button', { name: 'Pause', exact: true }).click();
      await page.getByText(/Paused since .+ by dashboard tester: nothing new is read/).waitFor();
      expect(await redis.client().exists(`${stream}:paused:g`)).toBe(1);
      await waitFor(async () => (await transport.health()).streams.find((st) => st.stream === stream)?.paused === true, {
        message: 'the worker to see the pause',
      });
      await redis.client().xadd(stream, '*', 'data', JSON.stringify({ order: 2 }));
      await page.getByRole('button', { name: 'Resume', exact: true }).click();
      await page.getByRole('button', { name: 'Pause', exact: true }).waitFor();
      await waitFor(() => handled.length === 2, { message: 'the entry written while paused handled after the resume' });
      expect(logs.slice(1)).toEqual([
        expect.stringMatching(/"tester" paused ".*orders" for group "g"$/),
        expect.stringMatching(/"tester" resumed ".*orders" for group "g"$/),
      ]);
      await redis.client().del(schedule);
    } finally {
      await app.close();
    }
  });

  it('in a Nest app: an ordered stream shows its owner on the stream page, and the keys waiting behind a failed entry in the consumer panel', async () => {
    const prefix = uniquePrefix();
    @Controller()
    class Worker {
      @StreamPattern('orders', { ordered: true })
      orders(@Payload() payload: { fail?: boolean }) {
        if (payload.fail) throw new Error('fails, waits a minute for its retry');
      }
    }
    const transport = new RedisStreamsServer({
      connection: redis.url,
      group: 'g',
      consumer: 'w1',
      keyPrefix: prefix,
      blockMs: 50,
      retry: { backoff: { type: 'fixed', delayMs: 60_000 } },
    });
    @Module({
      controllers: [Worker],
      imports: [
        RedisStreamsDashboardModule.register({ basePath: '/ops/streams', connection: redis.url, match: `${prefix}*`, server: transport }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    app.connectMicroservice({ strategy: transport });
    await app.startAllMicroservices();
    await app.listen(0, '127.0.0.1');
    try {
      const stream = `${prefix}orders`;
      for (const fail of [true, false])
        await redis.client().xadd(stream, '*', 'data', JSON.stringify({ fail }), 'partitionKey', 'customer-<i>7</i>');
      const page = await browser.page();
      const base = `${await app.getUrl()}/ops/streams/`.replace('[::1]', '127.0.0.1');
      await page.goto(base);
      const panel = page.getByRole('region', { name: "This app's consumer" });
      await panel.getByText(/^owned here \(epoch \d+\), 1 key\(s\) blocked$/).waitFor();
      const blocked = panel.getByRole('table', { name: 'Keys waiting behind a failed entry' });
      // The key as text: a producer's key is never markup.
      await blocked.getByRole('row', { name: /customer-<i>7<\/i>/ }).waitFor();
      expect(await page.locator('i').count()).toBe(0);
      await page.goto(`${base}#/stream/${encodeURIComponent(stream)}`);
      await page.getByText(/Ordered: owned by w1 \(epoch \d+, lease .* left\); 1 member\(s\) share the partitions/).waitFor();
      await browser.shot(page, 'dashboard-ordered-stream');
    } finally {
      await app.close();
    }
  });

  it('in a Nest app: app.close() does not wait for an open dashboard page (its poll in flight when the app shuts down)', async (ctx) => {
    if (!redis.owned) ctx.skip(); // pauses the whole server
    const prefix = uniquePrefix();
    await backlog(`${prefix}orders`, 1, 0);
    // The app's requests in flight, as the server sees them.
    let inFlight = 0;
    @Module({ imports: [RedisStreamsDashboardModule.register({ basePath: '/ops', connection: redis.url, match: `${prefix}*` })] })
    class AppModule implements NestModule {
      configure(consumer: MiddlewareConsumer) {
        const count = (_req: unknown, res: ServerResponse, next: () => void) => {
          inFlight++;
          res.once('close', () => inFlight--);
          next();
        };
        consumer.apply(count).forRoutes({ path: '{*path}', method: RequestMethod.ALL });
      }
    }
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    const page = await browser.page();
    await page.goto(`${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/`);
    await refreshes(page, 1);
    // Redis paused: the page's next poll waits in the app when it shuts down, on a kept-alive connection.
    await redis.client().client('PAUSE', 2000, 'ALL');
    await waitFor(() => inFlight > 0, { message: 'a poll in flight in the app' });
    const closed = await within(
      app.close().then(() => 'closed'),
      10_000,
      'still open',
    );
    // Before the fix the page's polls kept reusing that connection, and close() waited for the tab to go.
    expect(closed).toBe('closed');
  });

  it('serveDashboard: close() does not wait for an open page (its poll in flight)', async (ctx) => {
    if (!redis.owned) ctx.skip(); // pauses the whole server
    const prefix = uniquePrefix();
    await backlog(`${prefix}orders`, 1, 0);
    const served = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*` });
    servers.push(served.server);
    let inFlight = 0;
    served.server.on('request', (_req, res: ServerResponse) => {
      inFlight++;
      res.once('close', () => inFlight--);
    });
    const page = await browser.page();
    await page.goto(served.url);
    await refreshes(page, 1);
    await redis.client().client('PAUSE', 2000, 'ALL');
    await waitFor(() => inFlight > 0, { message: 'a poll in flight' });
    const closed = await within(
      served.close().then(() => 'closed'),
      10_000,
      'still open',
    );
    expect(closed).toBe('closed');
  });

  it('in a Nest app on Fastify: the page under its base path, and an action through Fastify (body unparsed before the middleware)', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await backlog(stream, 2, 1);
    const dead = deadLetterKey(stream);
    const letter = await forgeDeadLetter(redis.client(), dead, stream);
    @Module({
      imports: [
        RedisStreamsDashboardModule.register({
          basePath: '/ops',
          connection: redis.url,
          match: `${prefix}*`,
          actions: { guard: { canActivate: () => true } },
          logger: { log: () => {} },
        }),
      ],
    })
    class FastifyAppModule {}
    const app = await NestFactory.create<NestFastifyApplication>(FastifyAppModule, new FastifyAdapter(), { logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const base = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/`;
      const page = await browser.page();
      await page.goto(base);
      await page.getByRole('row', { name: new RegExp(stream) }).waitFor();
      await page.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
      page.on('dialog', (dialog) => void dialog.accept());
      await page.getByRole('checkbox', { name: `Select ${letter}` }).check();
      await page.getByRole('button', { name: 'Delete', exact: true }).click();
      // Sent once its undo time is over.
      await page.getByRole('alert').filter({ hasText: 'deleted 1' }).waitFor({ timeout: 15_000 });
      expect(await redis.client().xlen(dead)).toBe(0);
      // Fastify's own routes still answer: the middleware passes on what is not under /ops.
      expect((await fetch(base.replace('/ops/', '/elsewhere'))).status).toBe(404);
    } finally {
      await app.close();
    }
  });
});
