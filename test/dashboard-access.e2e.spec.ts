import { Module, type CanActivate, type ExecutionContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { IncomingMessage, Server } from 'node:http';
import { of } from 'rxjs';
import { RedisStreamsDashboardModule, serveDashboard, type RedisStreamsDashboardModuleOptions } from 'nestjs-redis-streams';
import { useBrowser } from './support/browser.js';
import { deadLetterKey } from './support/redis-server.js';
import { forgeDeadLetter } from './support/dead-letter.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();
const browser = useBrowser();
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => (s.close(resolve), s.closeAllConnections()))));
});

/** A stream with a group, one entry and one dead letter of it. */
async function oneLetter() {
  const prefix = uniquePrefix();
  const stream = `${prefix}orders`;
  await redis.client().xgroup('CREATE', stream, 'g', '0', 'MKSTREAM');
  await redis.client().xadd(stream, '*', 'data', '{"secret":"payload"}', 'headers', '{}');
  const dead = deadLetterKey(stream);
  return { prefix, stream, dead, letter: await forgeDeadLetter(redis.client(), dead, stream) };
}

/** A Nest app with only the dashboard module, mounted at /ops, listening on loopback: its base URL and close(). */
async function nestApp(options: Partial<RedisStreamsDashboardModuleOptions> & { match: string }) {
  @Module({ imports: [RedisStreamsDashboardModule.register({ basePath: '/ops', connection: redis.url, ...options })] })
  class AppModule {}
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  return { base: `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/`, close: () => app.close() };
}

const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });

describe('dashboard module wiring (issue 51)', () => {
  it('registerAsync takes its options from a factory with injected providers (a config read at bootstrap, not at import)', async () => {
    const { prefix, stream } = await oneLetter();
    const SETTINGS = Symbol('settings');
    @Module({ providers: [{ provide: SETTINGS, useFactory: () => ({ url: redis.url, match: `${prefix}*` }) }], exports: [SETTINGS] })
    class SettingsModule {}
    @Module({
      imports: [
        RedisStreamsDashboardModule.registerAsync({
          imports: [SettingsModule],
          inject: [SETTINGS],
          useFactory: async (settings: { url: string; match: string }) => ({
            basePath: '/ops',
            connection: settings.url,
            match: settings.match,
          }),
        }),
      ],
    })
    class AppModule {}
    const app = await NestFactory.create(AppModule, { logger: false });
    await app.listen(0, '127.0.0.1');
    try {
      const base = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/ops/`;
      const overview = (await (await fetch(`${base}api/overview`)).json()) as { streams: { stream: string }[] };
      expect(overview.streams.map((s) => s.stream)).toContain(stream);
    } finally {
      await app.close();
    }
  });

  it('a wrong option fails before the dashboard connects: register throws at once, registerAsync fails its bootstrap and leaves no connection open (review finding)', async () => {
    expect(() => RedisStreamsDashboardModule.register({ basePath: '/ops', connection: redis.url, pagesize: 10 } as never)).toThrow(
      /invalid option "dashboard.pagesize"/,
    );
    expect(() => RedisStreamsDashboardModule.registerAsync({ useClass: Object } as never)).toThrow(
      /invalid option "registerAsync.useClass"/,
    );
    const dashboards = async () =>
      String(await redis.client().client('LIST'))
        .split('\n')
        .filter((l) => l.includes('name=redis-streams:dashboard ')).length;
    const before = await dashboards();
    @Module({
      imports: [
        RedisStreamsDashboardModule.registerAsync({ useFactory: () => ({ basePath: '/ops', connection: redis.url, pageSize: 5000 }) }),
      ],
    })
    class AppModule {}
    await expect(NestFactory.create(AppModule, { logger: false, abortOnError: false })).rejects.toThrow(
      /invalid option "dashboard.pageSize"/,
    );
    expect(await dashboards()).toBe(before);
  });

  it("registerAsync validates the factory's options as register does, naming the option, at bootstrap", async () => {
    @Module({ imports: [RedisStreamsDashboardModule.registerAsync({ useFactory: () => ({ basePath: '/', connection: redis.url }) })] })
    class AppModule {}
    await expect(NestFactory.create(AppModule, { logger: false, abortOnError: false })).rejects.toThrow(
      /invalid option "basePath": must be a path such as "\/dashboard"/,
    );
  });
});

describe('dashboard access', () => {
  it('in a Nest app: a read guard refuses the page, its script and the API; a reader the action guard refuses sees no button', async () => {
    const { prefix, stream, dead } = await oneLetter();
    // Readers carry x-role reader or admin; only admin acts. One guard a Nest guard, the other a function.
    const role = (req: IncomingMessage) => String(req.headers['x-role'] ?? '');
    const adminOnly: CanActivate = { canActivate: (ctx: ExecutionContext) => role(ctx.switchToHttp().getRequest()) === 'admin' };
    const app = await nestApp({
      match: `${prefix}*`,
      read: { guard: (req) => ['reader', 'admin'].includes(role(req)) },
      actions: { guard: adminOnly, who: () => 'admin' },
      logger: { log: () => {} },
    });
    try {
      const { base } = app;
      for (const path of ['', 'app.js', 'app.css', 'api/overview', `api/entry?key=${encodeURIComponent(stream)}&id=0-1`, 'api/config']) {
        const anonymous = await fetch(`${base}${path}`);
        expect([path, anonymous.status]).toEqual([path, 403]);
        expect(await anonymous.text()).not.toContain('payload');
      }
      // An action by someone the read guard refuses is refused before the action guard is asked.
      const post = await fetch(`${base}api/dead-letters/delete`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard', 'x-role': 'nobody' },
        body: JSON.stringify({ key: dead, ids: ['0-1'] }),
      });
      expect(post.status).toBe(403);
      expect((await fetch(`${base}api/overview`, { headers: { 'x-role': 'reader' } })).status).toBe(200);

      const reader = await browser.page({ extraHTTPHeaders: { 'x-role': 'reader' } });
      await reader.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
      await reader.getByRole('table', { name: 'Dead letters' }).waitFor();
      expect(await reader.getByRole('button', { name: /Redrive|Delete/ }).count()).toBe(0);
      expect(await reader.getByRole('checkbox').count()).toBe(0);
      const admin = await browser.page({ extraHTTPHeaders: { 'x-role': 'admin' } });
      await admin.goto(`${base}#/dead/${encodeURIComponent(dead)}`);
      await admin.getByRole('button', { name: 'Delete', exact: true }).waitFor();
    } finally {
      await app.close();
    }
  });

  it("in a Nest app: a guard's Observable counts by its last value, as Nest's own; a guard class given for an instance is refused at register", async () => {
    const { prefix } = await oneLetter();
    class ClassGuard implements CanActivate {
      canActivate() {
        return true;
      }
    }
    expect(() =>
      RedisStreamsDashboardModule.register({
        basePath: '/ops',
        connection: redis.url,
        read: { guard: ClassGuard as unknown as CanActivate },
      }),
    ).toThrow(/invalid option "read": a guard class: pass an instance \(new ClassGuard\(\)\)/);
    // Nest reads an Observable guard by its last value (lastValueFrom): true then false refuses.
    const app = await nestApp({ match: `${prefix}*`, read: { guard: { canActivate: () => of(true, false) } } });
    try {
      const { base } = app;
      expect((await fetch(`${base}api/overview`)).status).toBe(403);
    } finally {
      await app.close();
    }
  });

  it('standalone: --read-auth asks every page for the password, and a reader with it sees no action unless actions are on', async () => {
    const { prefix, dead } = await oneLetter();
    const read = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, readPassword: 'r3ad' });
    servers.push(read.server);
    for (const path of ['', 'app.js', 'api/overview']) expect((await fetch(`${read.url}${path}`)).status).toBe(401);
    expect((await fetch(`${read.url}api/overview`, { headers: basic('ops', 'wrong') })).status).toBe(401);
    expect((await fetch(`${read.url}api/config`, { headers: basic('ops', 'r3ad') })).status).toBe(200);
    expect(await (await fetch(`${read.url}api/config`, { headers: basic('ops', 'r3ad') })).json()).toMatchObject({ actions: false });

    // Both passwords: the read one reads, only the actions' one acts, and the page shows buttons to that one only.
    const both = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, readPassword: 'r3ad', actionsPassword: 'act10n' });
    servers.push(both.server);
    const deadPage = `${both.url}#/dead/${encodeURIComponent(dead)}`;
    const reader = await browser.page({ httpCredentials: { username: 'viewer', password: 'r3ad' } });
    await reader.goto(deadPage);
    await reader.getByRole('table', { name: 'Dead letters' }).waitFor();
    expect(await reader.getByRole('button', { name: /Redrive|Delete/ }).count()).toBe(0);
    const refused = await fetch(`${both.url}api/dead-letters/delete`, {
      method: 'POST',
      headers: { ...basic('viewer', 'r3ad'), 'content-type': 'application/json', 'x-requested-by': 'redis-streams-dashboard' },
      body: JSON.stringify({ key: dead, ids: ['0-1'] }),
    });
    expect(refused.status).toBe(403);
    const operator = await browser.page({ httpCredentials: { username: 'ops', password: 'act10n' } });
    await operator.goto(deadPage);
    await operator.getByRole('button', { name: 'Delete', exact: true }).waitFor();
    expect(await redis.client().xlen(dead)).toBe(1);
  });
});
