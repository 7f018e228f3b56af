// npm run check:publish: `npm publish --dry-run` of the library, held clean. It fails on any npm warning (but the
// one a dry run without a login always prints), on a tarball without what an app loads (every "exports" and "bin"
// target, README.md, LICENSE) or with anything outside the allowed paths (tests, sources, maps, build info,
// dotfiles such as .env or .npmrc), and on a doc telling users to `npm install nestjs-redis-streams` by name
// while the package is not on the registry (CONTRIBUTING.md, "Releasing"). Needs a build (npm run build).
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const lib = `${root}libs/redis-streams/`;
const problems = [];

const run = spawnSync('npm', ['publish', '--dry-run', '--json', '-w', 'nestjs-redis-streams'], { cwd: root, encoding: 'utf8' });
if (run.status !== 0) {
  process.stderr.write(run.stderr);
  console.error(`publish: npm publish --dry-run exited ${run.status}`);
  process.exit(1);
}
for (const line of run.stderr.split('\n')) {
  if (!/^npm (warn|error)/i.test(line)) continue;
  // No credentials here, by design: the dry run says so and goes on.
  if (/requires you to be logged in to .* \(dry-run\)$/.test(line)) continue;
  problems.push(`npm says: ${line}`);
}

const [pack] = Object.values(JSON.parse(run.stdout));
const files = new Set(pack.files.map((f) => f.path));
const allowed = [
  /^(package\.json|README\.md|LICENSE)$/,
  /^(core|terminus)\/package\.json$/, // for node10 resolution of the subpaths
  /^bin\/[\w-]+\.js$/,
  /^dist\/cjs\/package\.json$/,
  /^dist\/(esm|cjs)\/[\w/.-]+\.(js|d\.ts)$/,
];
for (const path of files) {
  const hidden = path.split('/').some((part) => part.startsWith('.'));
  if (hidden || /\.(spec|test)\./.test(path) || !allowed.some((re) => re.test(path))) problems.push(`the tarball has ${path}`);
}
const manifest = JSON.parse(readFileSync(`${lib}package.json`, 'utf8'));
const needed = ['package.json', 'README.md', 'LICENSE', ...Object.values(manifest.bin)];
const targets = (value) => (typeof value === 'string' ? [value] : Object.values(value).flatMap(targets));
for (const [entry, target] of Object.entries(manifest.exports)) if (entry !== './package.json') needed.push(...targets(target));
for (const path of needed.map((p) => p.replace(/^\.\//, ''))) if (!files.has(path)) problems.push(`the tarball lacks ${path}`);

// Until the first publish, an install by name is a 404: docs give the tarball's path (README.md, "Install").
const docs = ['README.md', 'CONTRIBUTING.md', 'libs/redis-streams/README.md', ...markdown('docs')];
for (const doc of docs) {
  readFileSync(`${root}${doc}`, 'utf8')
    .split('\n')
    .forEach((line, i) => {
      if (/\b(npm (install|i|add)|yarn add|pnpm add)\b[^\n`]*(?<![\w/.-])nestjs-redis-streams(?![\w.-])/.test(line))
        problems.push(`${doc}:${i + 1} installs the package by name, which the registry does not have yet: ${line.trim()}`);
    });
}

if (problems.length > 0) {
  for (const problem of problems) console.error(`publish: ${problem}`);
  process.exit(1);
}
console.log(`publish: ${pack.id} dry run clean: ${files.size} files, ${Math.round(pack.size / 1024)} kB packed`);

function markdown(dir) {
  return readdirSync(`${root}${dir}`, { withFileTypes: true }).flatMap((d) =>
    d.isDirectory() ? markdown(`${dir}/${d.name}`) : d.name.endsWith('.md') ? [`${dir}/${d.name}`] : [],
  );
}
