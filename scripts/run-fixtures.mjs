// node scripts/run-fixtures.mjs [name…]: each fixture under fixtures/ is a small app of its own.
// It is copied to a fresh directory, installs its own locked dependencies (the library's peers
// resolved afresh: the newest in range) plus the packed library tarball (npm install <tarball>),
// and runs its own `npm test` against a throwaway redis-server on a free loopback port (REDIS_URL). The fixtures run at once (their
// installs mostly wait on the registry); each one's output is printed in one piece when it ends.
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/** Runs `cmd`, its output appended to `out`; rejects on a non-zero exit. */
const run = (out, cmd, args, cwd, env = {}) =>
  new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d) => (text += d));
    child.stderr.on('data', (d) => (text += d));
    child.on('error', reject);
    child.on('close', (code) => {
      out.push(text);
      if (code === 0) resolve(text);
      else reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`));
    });
  });

/** The library's peers: resolved afresh on every run (the newest in each fixture's range), not taken from its lock. */
const PEERS = /(^|\/)node_modules\/(@nestjs\/[^/]+|ioredis|rxjs|reflect-metadata)$/;

/**
 * The fixture's lockfile, checked against its package.json (a stale one would be re-resolved on every
 * run, silently), without the peers' entries.
 */
function prepareLock(name, dir) {
  const pkg = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
  const lock = JSON.parse(readFileSync(`${dir}/package-lock.json`, 'utf8'));
  for (const field of ['dependencies', 'devDependencies']) {
    if (JSON.stringify(pkg[field] ?? {}) !== JSON.stringify(lock.packages[''][field] ?? {}))
      throw new Error(
        `fixtures/${name}/package-lock.json does not match its package.json's ${field}: run npm install --package-lock-only in fixtures/${name}`,
      );
  }
  for (const path of Object.keys(lock.packages)) if (PEERS.test(path)) delete lock.packages[path];
  writeFileSync(`${dir}/package-lock.json`, `${JSON.stringify(lock, null, 2)}\n`);
}

async function runFixture(name) {
  const out = [];
  const dir = mkdtempSync(`${tmpdir()}/nrs-fixture-${name}-`);
  cpSync(`${root}fixtures/${name}`, dir, { recursive: true, filter: (src) => !/node_modules|dist$/.test(src) });
  const started = Date.now();
  let redis;
  try {
    prepareLock(name, dir);
    redis = await startRedisServer();
    out.push(`fixture ${name}: installing into ${dir}\n`);
    // Its lockfile and the tarball in one install: the registry is asked for tarballs only, not for every package's metadata.
    await run(out, 'npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefer-offline', '--no-save', tarball], dir);
    const versions = await run(out, 'npm', ['ls', '--depth=0'], dir);
    out.pop(); // its output is kept for a failure only: the versions line below says what matters
    out.push(
      `fixture ${name}: ${versions
        .split('\n')
        .filter((l) => /@nestjs\/core|ioredis|rxjs|reflect-metadata|typescript|jest@|vitest|nestjs-redis-streams/.test(l))
        .map((l) => l.replace(/^[^\w@]+/, ''))
        .join(', ')}\n`,
    );
    await run(out, 'npm', ['test'], dir, { REDIS_URL: `redis://127.0.0.1:${redis.port}` });
    out.push(`fixture ${name}: passed in ${Math.round((Date.now() - started) / 1000)} s\n`);
    return true;
  } catch (err) {
    out.push(`fixture ${name}: FAILED (${err.message})\n`);
    return false;
  } finally {
    process.stdout.write(out.join(''));
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const passed = await Promise.all(names.map(runFixture));
process.exit(passed.every(Boolean) ? 0 : 1);
