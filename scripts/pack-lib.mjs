// Packs the library exactly as npm would publish it, into dist/pack/, and prints the tarball's path.
import { execFileSync } from 'node:child_process';
import { mkdirSync, renameSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const dest = `${root}dist/pack`;
mkdirSync(dest, { recursive: true });
const [pack] = JSON.parse(
  execFileSync('npm', ['pack', '-w', 'nestjs-redis-streams', '--pack-destination', dest, '--json'], { cwd: root, encoding: 'utf8' }),
);
const tarball = `${dest}/nestjs-redis-streams.tgz`;
renameSync(`${dest}/${pack.filename}`, tarball);
process.stdout.write(`${tarball}\n`);
