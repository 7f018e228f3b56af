import { Schedules, serveDashboard } from 'nestjs-redis-streams';
import type { Server } from 'node:http';
import { useBrowser } from './support/browser.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

// The stream page's schedules card in a real browser: listed with their next fire, a script in an id shown as text,
// and Remove (an action) removing one.

const redis = useRedis();
const browser = useBrowser();
const servers: Server[] = [];
afterEach(() => {
  for (const s of servers.splice(0)) s.close();
});

describe("the dashboard's schedules", () => {
  it('lists them on the stream page and removes one with its button', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const schedules = new Schedules(redis.client());
    await schedules.set(stream, 'nightly', { cron: '30 2 * * *', tz: 'Europe/Berlin', payload: 1 });
    await schedules.set(stream, '<img src=x onerror=alert(1)>', { every: 60_000, payload: 2 });
    const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, actionsPassword: 'act10n' });
    servers.push(server);
    const page = await browser.page({ httpCredentials: { username: 'ops', password: 'act10n' } });
    page.on('dialog', (d) => void d.accept());
    await page.goto(`${url}#/stream/${encodeURIComponent(stream)}`);
    const table = page.getByRole('table', { name: 'Repeatable schedules of this stream' });
    await table.waitFor();
    const text = await table.innerText();
    expect(text).toContain('cron 30 2 * * * Europe/Berlin');
    expect(text).toContain('<img src=x onerror=alert(1)>');
    expect(await page.locator('img[src=x]').count()).toBe(0);
    await page.locator('button[data-focus="schedule:nightly"]').click();
    await waitFor(async () => (await schedules.get(stream, 'nightly')) === undefined, { message: 'nightly removed' });
  });
});
