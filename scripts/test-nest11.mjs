// node scripts/test-nest11.mjs: the test files that exercise Nest's or ioredis' API (AGAIN) once more, against the lower end
// of the peer ranges: @nestjs/* 11 and ioredis 5. The working tree is copied to a fresh directory,
// its devDependencies are moved to those majors (dropped from the lockfile, so npm resolves them as a
// user's upgrade would); there the whole tree is type-checked against them and the files in AGAIN run.
// Built once: the build here (a no-op after `npm run build`) is copied there, as the emitted
// JavaScript does not depend on the types it was checked against.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(`${tmpdir()}/nrs-nest11-`);
const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && !f.startsWith('fixtures/'));
for (const f of files) {
  mkdirSync(dirname(`${dir}/${f}`), { recursive: true });
  cpSync(`${root}${f}`, `${dir}/${f}`);
}
const pkg = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
// @nestjs/platform-express (the demo worker's health listener) and -fastify (the dashboard's test) follow Nest's major: 12.x needs Nest 12.
// @nestjs/terminus stays: 12.x supports Nest 11 and 12.
const LOWER = {
  '@nestjs/common': '^11.0.0',
  '@nestjs/core': '^11.0.0',
  '@nestjs/microservices': '^11.0.0',
  '@nestjs/platform-express': '^11.0.0',
  '@nestjs/platform-fastify': '^11.0.0',
  '@nestjs/testing': '^11.0.0',
  ioredis: '^5.0.0',
};
Object.assign(pkg.devDependencies, LOWER);
writeFileSync(`${dir}/package.json`, `${JSON.stringify(pkg, null, 2)}\n`);
// The lockfile without them: npm resolves these afresh, as a user's install would, and keeps the rest locked
// (a full resolution asked the registry for every package's metadata: minutes on a fresh machine).
const lock = JSON.parse(readFileSync(`${dir}/package-lock.json`, 'utf8'));
const moved = new RegExp(`(^|/)node_modules/(${Object.keys(LOWER).join('|')})$`);
for (const path of Object.keys(lock.packages)) if (moved.test(path)) delete lock.packages[path];
writeFileSync(`${dir}/package-lock.json`, `${JSON.stringify(lock, null, 2)}\n`);

// What differs under @nestjs/* 11 and ioredis 5 is Nest's dispatch (event handlers, processing hooks,
// request replies, exception filters, shutdown hooks, Terminus) and ioredis' API (connecting, its
// errors, its Cluster class the command lane extends, blocking reads): the files that exercise those
// run here. What Redis decides (groups, PELs, leases, dead letters, lag, retention, chaos) does not
// change with either and runs once, in the main pass, as do the loop's own mechanics (concurrency, the fast park,
// a batch's telemetry and edges, dead letters: no Nest or ioredis API of their own; batch-nest has Nest's batch dispatch). On a cluster, cluster.e2e runs again (ioredis' Cluster class is
// its own API), not the core suites the cluster project repeats.
const AGAIN = [
  'batch-nest.e2e',
  'client.e2e',
  'cluster.e2e',
  'connection-logs.e2e',
  'dashboard.e2e',
  'dashboard-unreachable.e2e',
  'delivery.e2e',
  'faults.e2e',
  'handler-errors.e2e',
  'health.e2e',
  // The Nest fast path: equivalence with Nest 11's chain, and Nest 11's code among the reviewed fingerprints.
  'nest-fast-path.e2e',
  'nest-fast-path',
  'orders-worker.e2e',
  'park-faults.e2e',
  'producer-errors.e2e',
  'reply-namespace.e2e',
  'secrets.e2e',
  'shutdown.e2e',
  'startup.e2e',
  'telemetry.e2e',
  'versions.e2e',
].map((name) => `test/${name}.spec.ts`);
const ONCE = files.filter((f) => /^test\/[^/]+\.spec\.ts$/.test(f) && !AGAIN.includes(f));
const missingFiles = AGAIN.filter((f) => !files.includes(f));
if (missingFiles.length > 0) throw new Error(`scripts/test-nest11.mjs names test files that do not exist: ${missingFiles.join(', ')}`);
const run = (cmd, args, env = {}) => execFileSync(cmd, args, { cwd: dir, stdio: 'inherit', env: { ...process.env, ...env } });
try {
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
  for (const out of ['dist/apps', 'libs/redis-streams/dist']) cpSync(`${root}${out}`, `${dir}/${out}`, { recursive: true });
  // The installed tree, hard-linked (a second or so, where a fresh install took 40 s): npm then swaps in only the
  // moved packages, writing new files. npm's own record of the tree and the tools' caches are written in place,
  // which would write through a link into the main tree: the copy goes without them.
  try {
    execFileSync('cp', ['-al', `${root}node_modules`, `${dir}/node_modules`]);
    for (const own of ['.package-lock.json', '.vite', '.vitest', '.experimental-vitest-cache', '.cache'])
      rmSync(`${dir}/node_modules/${own}`, { recursive: true, force: true });
  } catch {
    rmSync(`${dir}/node_modules`, { recursive: true, force: true }); // no hard links here (another device): a fresh install
  }
  process.stdout.write(`nest11: installing @nestjs/* 11 and ioredis 5 into ${dir}\n`);
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', '--prefer-offline']);
  const versions = execFileSync('npm', ['ls', '@nestjs/core', '@nestjs/microservices', 'ioredis', '--depth=0'], {
    cwd: dir,
    encoding: 'utf8',
  });
  process.stdout.write(versions);
  // What the pass is for: every moved package at the major it was moved to.
  const installed = JSON.parse(execFileSync('npm', ['ls', ...Object.keys(LOWER), '--depth=0', '--json'], { cwd: dir, encoding: 'utf8' }));
  for (const [name, range] of Object.entries(LOWER)) {
    const version = installed.dependencies?.[name]?.version;
    if (version?.split('.')[0] !== range.replace(/^\^/, '').split('.')[0])
      throw new Error(`scripts/test-nest11.mjs: ${name} installed at ${version ?? 'no version'}, not ${range}`);
  }
  run('npm', ['run', 'typecheck']);
  // The pass takes the newest 11.x, as a user's install would. A release whose code the Nest fast path was not
  // reviewed against runs every entry on Nest's full chain (correct, slower): said loudly here, and the fast path's
  // own files are left out of this pass rather than turn it red for an upstream release (the other Nest files
  // here then exercise that full chain). On Nest 12 the lockfile pins the reviewed code, and the check fails.
  const FAST_PATH = ['test/nest-fast-path.e2e.spec.ts', 'test/nest-fast-path.spec.ts'];
  try {
    execFileSync('node', ['scripts/run-tests.mjs', '--project', 'node', 'test/nest-fast-path.spec.ts'], {
      cwd: dir,
      stdio: 'pipe',
      env: process.env,
    });
  } catch (err) {
    // Only the fingerprint check's own failure means an unreviewed release; any other failure fails the lane.
    const said = `${err.stdout ?? ''}${err.stderr ?? ''}`;
    if (!said.includes('unreviewed Nest code')) {
      process.stdout.write(said);
      throw err;
    }
    process.stdout.write(
      "nest11: WARNING: this Nest 11 release is not among the fast path's reviewed code (test/nest-fast-path.spec.ts prints its fingerprints): its entries take the full chain; the fast path's files are skipped in this pass\n",
    );
    ONCE.push(...FAST_PATH);
  }
  // The node project; of the cluster project only cluster.e2e, where ioredis' Cluster class is the API under test (the
  // core suites on a cluster drive it the same way, and once under ioredis 5 is enough).
  run('node', ['scripts/run-tests.mjs', '--project', 'node'], { TEST_SKIP: ONCE.join(',') });
  run('node', ['scripts/run-tests.mjs', '--project', 'cluster', 'test/cluster.e2e.spec.ts']);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
