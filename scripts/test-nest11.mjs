// node scripts/test-nest11.mjs: the repository's test suite once more (but the few files in ONCE), against the lower end
// of the peer ranges: @nestjs/* 11 and ioredis 5. The working tree is copied to a fresh directory,
// its devDependencies are moved to those majors (no lockfile, so npm resolves them as a user's
// install would), and `npm test` runs there: build, type-check, every test.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dir = mkdtempSync(`${tmpdir()}/nrs-nest11-`);
const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((f) => f && !f.startsWith('fixtures/') && f !== 'package-lock.json');
for (const f of files) {
  mkdirSync(dirname(`${dir}/${f}`), { recursive: true });
  cpSync(`${root}${f}`, `${dir}/${f}`);
}
const pkg = JSON.parse(readFileSync(`${dir}/package.json`, 'utf8'));
// @nestjs/platform-express (the demo worker's health listener) follows Nest's major: 12.x needs Nest 12.
// @nestjs/terminus stays: 12.x supports Nest 11 and 12.
for (const name of ['@nestjs/common', '@nestjs/core', '@nestjs/microservices', '@nestjs/platform-express', '@nestjs/testing']) pkg.devDependencies[name] = '^11.0.0';
pkg.devDependencies.ioredis = '^5.0.0';
writeFileSync(`${dir}/package.json`, `${JSON.stringify(pkg, null, 2)}\n`);

const ONCE = ['test/chaos.e2e.spec.ts', 'test/group-storm.e2e.spec.ts', 'test/demo-cluster.e2e.spec.ts', 'test/cluster-harness.e2e.spec.ts'];
const run = (cmd, args) => execFileSync(cmd, args, { cwd: dir, stdio: 'inherit' });
try {
  process.stdout.write(`nest11: installing @nestjs/* 11 and ioredis 5 into ${dir}\n`);
  run('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error']);
  const versions = execFileSync('npm', ['ls', '@nestjs/core', '@nestjs/microservices', 'ioredis', '--depth=0'], { cwd: dir, encoding: 'utf8' });
  process.stdout.write(versions);
  // Files that exercise Redis, the test harness or process kills rather than Nest's or ioredis' API
  // run once per CI (the main pass): the CI run must stay under 15 minutes.
  execFileSync('npm', ['test'], { cwd: dir, stdio: 'inherit', env: { ...process.env, TEST_SKIP: ONCE.join(',') } });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
