// dist/cjs holds CommonJS: a package.json there tells Node (and TypeScript, for its .d.ts) so,
// inside a package whose own "type" is "module".
import { writeFileSync } from 'node:fs';
writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), `${JSON.stringify({ type: 'commonjs' }, null, 2)}\n`);
