// On a 390-pixel phone the tables keep what matters in view (issue 51): the overview's lag and state, a
// pending entry's id beside its Release button and its state, a dead letter's reason. "In view": the cell
// lies inside the screen's width, not past a table's own scroll. Each page is saved with TEST_SCREENSHOTS=1 (test-results/screenshots).
import type { Server } from 'node:http';
import type { Page } from 'playwright-core';
import { serveDashboard } from 'nestjs-redis-streams';
import { refreshes, useBrowser } from './support/browser.js';
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

const WIDTH = 390;

/** The first row's cell under `column` of the table `label`: its box on screen and its text. */
function cell(page: Page, label: string, column: string) {
  return page.evaluate(
    ([label, column]) => {
      const table = [...document.querySelectorAll('table')].find((t) => t.getAttribute('aria-label') === label);
      if (!table) return null;
      const index = [...table.querySelectorAll('thead th')].findIndex((th) => th.textContent === column);
      const td = table.querySelector('tbody tr')?.querySelectorAll('td')[index];
      if (index < 0 || !td) return null;
      const r = td.getBoundingClientRect();
      return { left: Math.round(r.left), right: Math.round(r.right), width: Math.round(r.width), text: td.textContent ?? '' };
    },
    [label, column] as const,
  );
}

/** Each named column of `label`'s first row lies within the screen's width, with something in it. */
async function inView(page: Page, label: string, columns: string[]) {
  for (const column of columns) {
    const c = await cell(page, label, column);
    expect([column, c !== null && c.left >= 0 && c.right <= WIDTH && c.width > 0, c]).toEqual([column, true, c]);
  }
}

describe('dashboard on a 390-pixel phone', () => {
  it('keeps lag and state, an entry id beside Release, and a dead letter reason in view', async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}${'long-stream-name-'.repeat(3)}orders`;
    await redis.client().xgroup('CREATE', stream, 'g', '0', 'MKSTREAM');
    for (let i = 0; i < 30; i++) await redis.client().xadd(stream, '*', 'data', JSON.stringify({ n: i }), 'headers', '{}');
    await redis.client().xreadgroup('GROUP', 'g', 'worker-with-a-long-name-1', 'COUNT', 3, 'STREAMS', stream, '>');
    const dead = deadLetterKey(stream);
    await forgeDeadLetter(redis.client(), dead, stream, { error: 'Error: the payment provider refused the card' });
    const { server, url } = await serveDashboard(redis.client(), { port: 0, match: `${prefix}*`, actionsPassword: 'pw' });
    servers.push(server);
    for (const theme of ['light', 'dark'] as const) {
      const page = await browser.page({
        viewport: { width: WIDTH, height: 844 },
        colorScheme: theme,
        httpCredentials: { username: 'oncall', password: 'pw' },
      });
      await page.goto(`${url}#/`);
      await refreshes(page, 1);
      await inView(page, 'Streams', ['Stream', 'Lag', 'State']);
      await browser.shot(page, `phone-overview-${theme}`);

      await page.goto(`${url}#/stream/${encodeURIComponent(stream)}`);
      await page.getByRole('table', { name: 'Pending entries of g' }).waitFor();
      await inView(page, 'Pending entries of g', ['Id', 'State', 'Actions']);
      // The entry's id and its Release button, side by side in one view. Polled: a refresh may replace the
      // button between finding it and measuring it (then the box is null), which says nothing of the layout.
      const release = page.getByRole('button', { name: /^Release / }).first();
      await expect
        .poll(
          async () => {
            // Each try bounded: boundingBox waits for the button itself, up to the page's step timeout.
            const box = await release.boundingBox({ timeout: 1000 });
            if (box === null) return 'not measured';
            return box.x >= 0 && box.x + box.width <= WIDTH ? 'in view' : `at ${box.x}+${box.width}`;
          },
          { timeout: 10_000 },
        )
        .toBe('in view');
      await browser.shot(page, `phone-stream-${theme}`);

      await page.goto(`${url}#/dead/${encodeURIComponent(dead)}`);
      await page.getByRole('table', { name: 'Dead letters' }).waitFor();
      await inView(page, 'Dead letters', ['Id', 'Reason']);
      expect((await cell(page, 'Dead letters', 'Reason'))!.text).toContain('the payment provider refused the card');
      await browser.shot(page, `phone-dead-letters-${theme}`);
      // Nothing wider than the screen: no page scrolls sideways.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBe(WIDTH);
    }
  });
});
