import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

/** Fails clearly when a test needs the build output and `npm run build` has not run. */
export function requireBuilt(relativePath: string): string {
  const path = `${repoRoot}${relativePath}`;
  if (!existsSync(path)) throw new Error(`${relativePath} is missing: run "npm run build" first (npm test does)`);
  return path;
}
