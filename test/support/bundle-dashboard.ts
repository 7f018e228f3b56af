import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Before any test file: the dashboard's browser code bundled into src/dashboard/app-script.ts (the page's
 * app.js), as `npm run build` does, so that tests, which run the library's source, serve the page's code
 * as it is now, built or not. Unchanged code writes nothing.
 */
export function setup(): void {
  const script = fileURLToPath(new URL('../../libs/redis-streams/scripts/bundle-dashboard.mjs', import.meta.url));
  execFileSync(process.execPath, [script], { stdio: 'inherit' });
}
