// node scripts/run-fixtures.mjs [name…]: each fixture under fixtures/ is a small app of its own.
// It is copied to a fresh directory, installs its own dependencies plus the packed library
// tarball (exactly as a user would: npm install <tarball>), and runs its own `npm test` against a
// throwaway redis-server on a free loopback port (REDIS_URL). Prints one line per fixture.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { startRedisServer } from './lib/redis-server.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const only = process.argv.slice(2);
const names = readdirSync(`${root}fixtures`).filter(
  (n) => existsSync(`${root}fixtures/${n}/package.json`) && (only.length === 0 || only.includes(n)),
);
if (names.length === 0) {
  process.stderr.write(`run-fixtures: no fixture named ${only.join(', ')} under fixtures/\n`);
  process.exit(1);
}
const tarball = execFileSync(process.execPath, [`${root}scripts/pack-lib.mjs`], { encoding: 'utf8' }).trim();

const run = (cmd, args, cwd, env = {}) => execFileSync(cmd, args, { cwd, stdio: 'inherit', env: { ...process.env, ...env } });
let failed = 0;
for (const name of names) {
  const dir = mkdtempSync(`${tmpdir()}/nrs-fixture-${name}-`);
  cpSync(`${root}fixtures/${name}`, dir, { recursive: true, filter: (src) => !/node_modules|dist$/.test(src) });
  const started = Date.now();
  const redis = await startRedisServer();
  try {
    process.stdout.write(`fixture ${name}: installing into ${dir}\n`);
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefer-offline'], dir);
    run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefer-offline', '--no-save', tarball], dir);
    const versions = execFileSync('npm', ['ls', '--depth=0'], { cwd: dir, encoding: 'utf8' });
    process.stdout.write(
      `fixture ${name}: ${versions
        .split('\n')
        .filter((l) => /@nestjs\/core|ioredis|rxjs|reflect-metadata|typescript|jest@|vitest|nestjs-redis-streams/.test(l))
        .map((l) => l.replace(/^[^\w@]+/, ''))
        .join(', ')}\n`,
    );
    run('npm', ['test'], dir, { REDIS_URL: `redis://127.0.0.1:${redis.port}` });
    process.stdout.write(`fixture ${name}: passed in ${Math.round((Date.now() - started) / 1000)} s\n`);
  } catch (err) {
    failed++;
    process.stdout.write(`fixture ${name}: FAILED (${err.message})\n`);
  } finally {
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
process.exit(failed === 0 ? 0 : 1);
