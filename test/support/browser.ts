import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type BrowserContextOptions, type Page } from 'playwright-core';
import { repoRoot } from './built.js';

/** Debian's Chromium (installed by .ci/run), with the flags that work on these closed machines (../shared/README.md). */
export const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';

/** Where page tests save their screenshots (not committed: docs/images holds the one the guide shows). */
export const SCREENSHOTS = `${repoRoot}/test-results/screenshots`;

/** TEST_SCREENSHOTS=1: page tests save what they checked, for a person to look at (Chromium's CPU, 0.7 s a page). */
const SAVE_SCREENSHOTS = process.env.TEST_SCREENSHOTS === '1';

/**
 * How long a test or hook of a file that drives a page may take. A page test is many steps (a navigation, waits on
 * the page's polls, screenshots), each of them Chromium's work on a CPU that CI's lanes keep full: the first test of a
 * file took more than the suite's 30 s there (2026-12-05) where it takes 3 to 10 s beside three CPU burners. Every
 * step still waits on a condition; this is the ceiling for a hang.
 */
export const PAGE_TEST_TIMEOUT_MS = 120_000;
/** How long one step of a page test (a navigation, a click, a wait for an element) may take. */
export const PAGE_STEP_TIMEOUT_MS = 60_000;

/**
 * One headless Chromium for a test file (Playwright gives it a fresh profile of its own); closed after all its tests.
 * Call it at the top of the file: it sets the file's timeouts (Vitest resets them after the file).
 */
export function useBrowser(): { page(options?: BrowserContextOptions): Promise<Page>; shot(page: Page, name: string): Promise<void> } {
  vi.setConfig({ testTimeout: PAGE_TEST_TIMEOUT_MS, hookTimeout: PAGE_TEST_TIMEOUT_MS });
  let browser: Browser | undefined;
  const pages: Page[] = [];
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterEach(async ({ task }) => {
    // A failed test says what its pages showed: the start of the page's text (its status line first).
    if (task.result?.state === 'fail')
      for (const p of pages) {
        // Bounded: a page whose script hangs is when this is wanted, and its evaluate would wait for ever.
        const said = await Promise.race([
          p.evaluate(() => document.body.innerText.slice(0, 600)),
          new Promise<string>((resolve) => setTimeout(resolve, 3000, '(no answer within 3 s: its script is busy)').unref()),
        ]).catch((err: unknown) => `(unreadable: ${String(err)})`);
        console.log(`page ${p.url()} showed: ${said}`);
      }
    await Promise.all(pages.splice(0).map((p) => p.context().close()));
  });
  afterAll(async () => {
    await browser?.close();
  });
  return {
    async page(options = {}) {
      const context = await browser!.newContext(options);
      const page = await context.newPage();
      // Each step's ceiling (Playwright's default is 30 s): on a CPU that CI's lanes keep full a navigation and its
      // render took longer than that once (2026-12-05); every step still waits on a condition.
      page.setDefaultTimeout(PAGE_STEP_TIMEOUT_MS);
      pages.push(page);
      return page;
    },
    async shot(page, name) {
      if (!SAVE_SCREENSHOTS) return;
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: `${SCREENSHOTS}/${name}.png`, fullPage: true });
    },
  };
}

/** Waits until the page has refreshed `times` more times (it refreshes every second): what it shows then was read after now. */
export async function refreshes(page: Page, times = 2): Promise<void> {
  const count = () => Number(document.body.dataset.refreshes ?? 0);
  const now = await page.evaluate(count);
  await page.waitForFunction((until) => Number(document.body.dataset.refreshes ?? 0) >= until, now + times);
}
