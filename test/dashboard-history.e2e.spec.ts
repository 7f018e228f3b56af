// History that survives the tab (issue 51): the dashboard's process samples the charts' figures with no
// page open, so that a page opened after an incident starts with it. The interval is shortened (200 ms a
// point: an hour's 240 points of 15 s are the unit test's, test/dashboard-history.spec.ts).
import { serveDashboard } from 'nestjs-redis-streams';
import { useBrowser } from './support/browser.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const browser = useBrowser();
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A connection of the test's own that counts the commands it is asked to send (the sampler's reads among them). */
function counting() {
  const client = redis.newClient();
  const sent: string[] = [];
  const spy = {
    client,
    sent,
    scripts: () => sent.filter((name) => name === 'evalsha' || name === 'eval').length,
    onSend: (_name: string) => {},
  };
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((command: { name: string }) => (
    sent.push(command.name),
    spy.onSend(command.name),
    send(command as never)
  )) as typeof client.sendCommand;
  return spy;
}

describe('dashboard history', () => {
  it('a page opened after an incident shows it at first load: the charts start from what the server kept with no tab open', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}orders`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const spy = counting();
    const { server, url, close } = await serveDashboard(spy.client, {
      port: 0,
      match: `${prefix}*`,
      history: { intervalMs: 200, keepMs: 60_000 },
    });
    closers.push(async () => (server.closeAllConnections(), await close()));
    // No request reaches the dashboard until the page opens: what it shows then is what its sampler kept.
    // The incident: 40 entries wait (lag 40) over several of its rounds (a round: a script for the stream, one per dead-letter
    // name; 15 scripts are 5 rounds or more), then are read and acknowledged.
    for (let i = 0; i < 40; i++) await redis.client().xadd(stream, '*', 'data', '{}');
    let scripts = spy.scripts();
    await waitFor(() => spy.scripts() >= scripts + 15);
    const read = (await redis.client().xreadgroup('GROUP', 'g', 'c', 'STREAMS', stream, '>')) as [string, [string, string[]][]][];
    await redis.client().xack(stream, 'g', ...read[0]![1].map(([id]) => id));
    scripts = spy.scripts();
    await waitFor(() => spy.scripts() >= scripts + 15);

    // Opened now: its first render draws the past (many points, the lag's peak of 40), not one dot.
    const page = await browser.page({ viewport: { width: 1280, height: 900 } });
    await page.goto(`${url}#/stream/${encodeURIComponent(stream)}`);
    const chart = page.locator(`[data-chart="stream:${stream}:lag"]`);
    await chart.waitFor();
    expect(Number(await chart.getAttribute('data-points'))).toBeGreaterThanOrEqual(10);
    expect(await chart.getByRole('img').getAttribute('aria-label')).toMatch(/now lag 0, pending 0; peak 40$/);
    // The overview's charts too (this page's streams, summed).
    await page.goto(`${url}#/`);
    const overview = page.locator('[data-chart="overview:0:lag"]');
    await overview.waitFor();
    expect(Number(await overview.getAttribute('data-points'))).toBeGreaterThanOrEqual(10);
    expect(await overview.getByRole('img').getAttribute('aria-label')).toMatch(/peak 40$/);
    await browser.shot(page, 'history-overview-first-load');
  });

  it('the sampler stops with the server: not one command after close, while a dashboard still open samples on', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}s`;
    await redis.client().xgroup('CREATE', stream, 'g', '$', 'MKSTREAM');
    const options = { port: 0, match: `${prefix}s*`, history: { intervalMs: 100, keepMs: 10_000 } };
    const closedSpy = counting();
    const openSpy = counting();
    // Keys out of scope enough that one walk of the key list takes several SCANs (COUNT 1000 each); the close
    // comes as one of them is sent, after a few rounds: the walk under way must stop there too (CI once saw two
    // SCANs after close).
    await redis.client().mset(...Array.from({ length: 5_000 }, (_, i) => [`${prefix}filler:${i}`, '1']).flat());
    const closed = await serveDashboard(closedSpy.client, options);
    const open = await serveDashboard(openSpy.client, options);
    closers.push(async () => (open.server.closeAllConnections(), await open.close()));
    let after = -1;
    let closing: Promise<void> | undefined;
    closedSpy.onSend = (name) => {
      if (closing || name.toLowerCase() !== 'scan' || closedSpy.scripts() < 3) return;
      after = closedSpy.sent.length;
      closed.server.closeAllConnections();
      closing = closed.close();
    };
    await waitFor(() => closing !== undefined);
    await closing;
    // Five rounds or more of the one still open (no request reaches either: these are their samplers' reads).
    const now = openSpy.scripts();
    await waitFor(() => openSpy.scripts() >= now + 15);
    expect(closedSpy.sent.slice(after)).toEqual([]);
  });
});
