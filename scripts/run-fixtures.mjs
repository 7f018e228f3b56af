// node scripts/run-fixtures.mjs [run…]: the apps under fixtures/ install the packed library and run their
// own e2e tests against a throwaway redis-server on a free loopback port (REDIS_URL). Each fixture runs in
// one or both of two ways, in a fresh directory:
// - locked (its package.json and package-lock.json): its locked dependencies, the library's peers
//   resolved afresh (the newest in its range), plus the tarball; then its own `npm test`;
// - new (its fixture.json names a `nest new` and a README install line): the app a user starts from,
//   `nest new` of that CLI version with the template's dependencies resolved today, then the README's
//   install line for it, verbatim but for the tarball's path, then the fixture's own src/ and test/ over
//   the template's, then the template's `npm run build` and `npm run test:e2e`. A release of a peer that
//   breaks the README's line (a version that does not exist, a peer conflict) fails here, not a user.
// The runs go at once (their installs mostly wait on the registry); each one's output is printed in one
// piece when it ends.
import { spawn, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { freePort } from './lib/ports.mjs';
import { startRedisServer } from './lib/redis-server.mjs';
import { waitFor } from './lib/wait-for.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Every run of every fixture: `<fixture>` (locked) and `<fixture>:new` (from `nest new`). */
const allRuns = readdirSync(`${root}fixtures`).flatMap((name) => [
  ...(existsSync(`${root}fixtures/${name}/package-lock.json`) ? [{ id: name, name, kind: 'locked' }] : []),
  ...(existsSync(`${root}fixtures/${name}/fixture.json`)
    ? [{ id: `${name}:new`, name, kind: 'new', ...JSON.parse(readFileSync(`${root}fixtures/${name}/fixture.json`, 'utf8')).new }]
    : []),
]);
const only = process.argv.slice(2);
const runs = allRuns.filter((r) => only.length === 0 || only.includes(r.id) || only.includes(r.name));
if (runs.length === 0) {
  process.stderr.write(`run-fixtures: no run named ${only.join(', ')}; there are ${allRuns.map((r) => r.id).join(', ')}\n`);
  process.exit(1);
}
const tarball = execFileSync(process.execPath, [`${root}scripts/pack-lib.mjs`], { encoding: 'utf8' }).trim();

/** Runs `cmd`, its output appended to `out`; rejects on a non-zero exit. */
const runCommand = (out, cmd, args, cwd, env = {}) =>
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

/** The README's install line for `which` (the ```sh block after `<!-- install: which … -->`), with `tarball` for its path. */
function readmeInstall(which, tarball) {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const block = new RegExp(`<!-- install: ${which}\\b[^\\n]*-->\\n\`\`\`sh\\n(.+)\\n\`\`\``).exec(readme);
  if (!block) throw new Error(`README.md has no install line marked <!-- install: ${which} -->`);
  const line = block[1].replace(/\/path\/to\/nestjs-redis-streams-\S+\.tgz/, tarball);
  if (line === block[1]) throw new Error(`README.md's ${which} install line names no /path/to/nestjs-redis-streams-<version>.tgz`);
  return line;
}

/** `nest new` of the fixture's CLI, then the README's install line; resolves with the app's directory. */
async function newApp(run, dir, out) {
  const quiet = ['--no-audit', '--no-fund', '--loglevel=error'];
  await runCommand(
    out,
    'npx',
    ['-y', run.cli, 'new', 'app', '--skip-git', '--skip-install', '--package-manager', 'npm', ...(run.args ?? [])],
    dir,
  );
  out.pop(); // the CLI's banner: kept for a failure only
  const app = `${dir}/app`;
  await runCommand(out, 'npm', ['install', ...quiet, '--prefer-offline'], app);
  const line = readmeInstall(run.install, tarball);
  out.push(`fixture ${run.id}: ${line}\n`);
  await runCommand(out, 'sh', ['-c', line], app);
  return app;
}

/** The fixture's own src/ and test/ over the template's (after the README's quick start, whose files they replace). */
const overlay = (run, app) => {
  for (const part of ['src', 'test']) cpSync(`${root}fixtures/${run.name}/${part}`, `${app}/${part}`, { recursive: true });
};

/**
 * The README's quick start as a user copies it: its files (each ```ts block named by its first line) in the
 * app's src/, built with the template's build, then the worker and the producer run; the producer's one
 * order must reach the handler and be acked (group orders-workers: lag 0, pending 0).
 */
async function readmeQuickStart(app, redisUrl, out) {
  const readme = readFileSync(`${root}README.md`, 'utf8');
  const files = [];
  for (const [, code] of readme.matchAll(/```ts\n([\s\S]*?)```/g)) {
    const file = /^\/\/ ([\w.-]+\.ts)/.exec(code)?.[1];
    if (!file) continue;
    writeFileSync(`${app}/src/${file}`, code);
    files.push(file);
  }
  await runCommand(out, 'npm', ['run', 'build'], app);
  const env = { ...process.env, REDIS_URL: redisUrl, PORT: String(await freePort()) };
  const procs = ['dist/main.js', 'dist/api-main.js'].map((script) => {
    const proc = spawn(process.execPath, [script], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    proc.stdout.on('data', (d) => (text += d));
    proc.stderr.on('data', (d) => (text += d));
    return { script, proc, text: () => text };
  });
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    const group = async () => {
      const rows = await redis.xinfo('GROUPS', 'orders').catch(() => []);
      const g = rows.map((r) => Object.fromEntries(r.map((v, i, a) => (i % 2 ? [] : [v, a[i + 1]])).filter((p) => p.length)));
      return g.find((x) => x.name === 'orders-workers');
    };
    await waitFor(
      async () => {
        const g = await group();
        return g && Number(g['entries-read']) >= 1 && g.pending === 0 && g.lag === 0;
      },
      { timeoutMs: 60_000, message: "the README producer's order handled and acked by the README worker" },
    ).catch(async (err) => {
      throw new Error(
        `${err.message}; group: ${JSON.stringify(await group())}\n${procs.map((p) => `${p.script}:\n${p.text()}`).join('\n')}`,
      );
    });
    out.push(`fixture readme: the quick start (${files.join(', ')}) handled and acked the producer's order\n`);
  } finally {
    redis.disconnect();
    for (const p of procs) p.proc.kill('SIGKILL');
  }
}

async function runFixture(run) {
  const out = [];
  const dir = mkdtempSync(`${tmpdir()}/nrs-fixture-${run.name}-`);
  const started = Date.now();
  let redis;
  try {
    let app = dir;
    if (run.kind === 'locked') {
      cpSync(`${root}fixtures/${run.name}`, dir, { recursive: true, filter: (src) => !/node_modules|dist$/.test(src) });
      prepareLock(run.name, dir);
      out.push(`fixture ${run.id}: installing into ${dir}\n`);
      // Its lockfile and the tarball in one install: the registry is asked for tarballs only, not for every package's metadata.
      await runCommand(
        out,
        'npm',
        ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefer-offline', '--no-save', tarball],
        dir,
      );
    } else {
      out.push(`fixture ${run.id}: ${run.cli} new, into ${dir}\n`);
      app = await newApp(run, dir, out);
    }
    const versions = await runCommand(out, 'npm', ['ls', '--depth=0'], app);
    out.pop(); // its output is kept for a failure only: the versions line below says what matters
    out.push(
      `fixture ${run.id}: ${versions
        .split('\n')
        .filter((l) => /@nestjs\/(core|microservices)|ioredis|rxjs|reflect-metadata|typescript@|jest@|vitest|nestjs-redis-streams/.test(l))
        .map((l) => l.replace(/^[^\w@]+/, ''))
        .join(', ')}\n`,
    );
    redis = await startRedisServer();
    const env = { REDIS_URL: `redis://127.0.0.1:${redis.port}` };
    if (run.readme) await readmeQuickStart(app, env.REDIS_URL, out);
    if (run.kind === 'new') overlay(run, app);
    if (run.kind === 'locked') await runCommand(out, 'npm', ['test'], app, env);
    else {
      await runCommand(out, 'npm', ['run', 'build'], app);
      await runCommand(out, 'npm', ['run', 'test:e2e'], app, env);
    }
    out.push(`fixture ${run.id}: passed in ${Math.round((Date.now() - started) / 1000)} s\n`);
    return true;
  } catch (err) {
    out.push(`fixture ${run.id}: FAILED (${err.message})\n`);
    return false;
  } finally {
    process.stdout.write(out.join(''));
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const passed = await Promise.all(runs.map(runFixture));
process.exit(passed.every(Boolean) ? 0 : 1);
