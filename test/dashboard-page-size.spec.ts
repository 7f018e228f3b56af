import { gzipSync } from 'node:zlib';
import { APP_SCRIPT } from '../libs/redis-streams/src/dashboard/app-script.js';
import { APP_CSS, FAVICON_SVG, pageHtml } from '../libs/redis-streams/src/dashboard/dashboard-page.js';

describe('the dashboard page', () => {
  it("stays within its size: HTML, script, style and favicon, each gzipped, at most 10 % over the 17.5 KB of issue 49, and issue 51's entry page and overview", () => {
    const parts = [pageHtml(), APP_SCRIPT, APP_CSS, FAVICON_SVG];
    const gzipped = parts.reduce((n, text) => n + gzipSync(text).length, 0);
    // 17.2 KB when the browser code became bundled modules (18.6 KB before, as Function.toString() sources).
    // 19.5 KB with issue 51's entry page (its state, history, letters and moves) and delayed entries (17.1 KB before them).
    // 21.1 KB with issue 51's overview too (history-fed charts, phone cards, attention grouped per pattern).
    expect(gzipped).toBeLessThanOrEqual(22_000);
    expect(gzipped).toBeGreaterThan(10_000);
  });
});
