import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { repoRoot, requireBuilt } from './support/built.js';

/** The ```ts blocks of a markdown file, each named by its first line (`// orders.module.ts`). */
function tsBlocks(markdown: string): { file: string; code: string }[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code], i) => ({
    file: /^\/\/ ([\w.-]+\.ts)/.exec(code!)?.[1] ?? `snippet-${i}.ts`,
    code: code!,
  }));
}

/** Type-checks the blocks as one app would: strict, ESM (nodenext), decorators with metadata, the built package. */
function compile(doc: string): string {
  const blocks = tsBlocks(readFileSync(`${repoRoot}${doc}`, 'utf8'));
  // Inside the repository, so that 'nestjs-redis-streams' resolves to the workspace package (its built exports).
  const dir = `${repoRoot}dist/readme-snippets/${doc.replace(/[/.]/g, '_')}`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const { file, code } of blocks) writeFileSync(`${dir}/${file}`, code);
  writeFileSync(`${dir}/package.json`, JSON.stringify({ type: 'module' }));
  writeFileSync(
    `${dir}/tsconfig.json`,
    JSON.stringify({
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'ES2023',
        strict: true,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
        isolatedModules: true,
        skipLibCheck: true,
        noEmit: true,
        types: ['node'],
        typeRoots: [`${repoRoot}node_modules/@types`],
      },
      include: ['*.ts'],
    }),
  );
  try {
    execFileSync(process.execPath, [`${repoRoot}node_modules/typescript/bin/tsc`, '-p', `${dir}/tsconfig.json`], {
      encoding: 'utf8',
      stdio: 'pipe',
    });
    return `${blocks.length} blocks`;
  } catch (err) {
    throw new Error(`${doc}: a TypeScript block does not compile:\n${(err as { stdout: string }).stdout}`, { cause: err });
  }
}

describe('the README code', () => {
  it('compiles: every TypeScript block of README.md, as an app would write it', () => {
    requireBuilt('libs/redis-streams/dist/esm/index.d.ts');
    expect(compile('README.md')).toMatch(/^[5-9]\d* blocks|^\d{2,} blocks/);
    // A tsc process: 23 s of a loaded CI run, near the default 30 s.
  }, 90_000);

  it('compiles: every TypeScript block of the package README', () => {
    requireBuilt('libs/redis-streams/dist/esm/index.d.ts');
    expect(compile('libs/redis-streams/README.md')).toMatch(/blocks$/);
  }, 90_000);
});
