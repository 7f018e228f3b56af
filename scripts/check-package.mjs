// npm run check:package: packs the library as npm would publish it and checks the tarball the way
// the ecosystem does: @arethetypeswrong/cli (types resolve for node10, node16 CJS/ESM and bundlers)
// and publint (package.json fields and files). Needs a build (npm run build).
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tarball = execFileSync(process.execPath, [`${root}scripts/pack-lib.mjs`], { encoding: 'utf8' }).trim();
const bin = (name) => `${root}node_modules/.bin/${name}`;
execFileSync(bin('attw'), [tarball], { stdio: 'inherit' });
execFileSync(bin('publint'), ['--strict', tarball], { stdio: 'inherit' });
