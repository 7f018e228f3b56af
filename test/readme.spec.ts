import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { posix } from 'node:path';
import { repoRoot, requireBuilt } from './support/built.js';

/** The ```ts blocks of a markdown file, each named by its first line (`// orders.module.ts`). */
function tsBlocks(markdown: string): { file: string; code: string }[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code], i) => ({
    file: /^\/\/ ([\w.-]+\.ts)/.exec(code!)?.[1] ?? `snippet-${i}.ts`,
    code: code!,
  }));
}

/** Type-checks the blocks as one app would: strict, ESM (nodenext), decorators with metadata, the built package; several docs in one tsc run, each in a folder of its own. */
function compile(...docs: string[]): string {
  // Inside the repository, so that 'nestjs-redis-streams' resolves to the workspace package (its built exports).
  const dir = `${repoRoot}dist/readme-snippets/${docs.length === 1 ? docs[0]!.replace(/[/.]/g, '_') : 'guide'}`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  let count = 0;
  for (const doc of docs) {
    const blocks = tsBlocks(readFileSync(`${repoRoot}${doc}`, 'utf8'));
    const sub = `${dir}/${doc.replace(/[/.]/g, '_')}`;
    mkdirSync(sub, { recursive: true });
    for (const { file, code } of blocks) writeFileSync(`${sub}/${file}`, code);
    count += blocks.length;
  }
  const blocks = { length: count };
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
      include: ['**/*.ts'],
    }),
  );
  try {
    execFileSync(process.execPath, [`${repoRoot}node_modules/typescript/bin/tsc`, '-p', `${dir}/tsconfig.json`], {
      encoding: 'utf8',
      stdio: 'pipe',
    });
    return `${blocks.length} blocks`;
  } catch (err) {
    throw new Error(`${docs.join(', ')}: a TypeScript block does not compile:\n${(err as { stdout: string }).stdout}`, { cause: err });
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

  it('compiles: every TypeScript block of the guide (docs/guide), in one tsc run', () => {
    requireBuilt('libs/redis-streams/dist/esm/index.d.ts');
    const guide = readdirSync(`${repoRoot}docs/guide`)
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/guide/${f}`);
    expect(compile(...guide)).toMatch(/^\d+ blocks$/);
  }, 90_000);
});

/** Markdown files a reader follows links between. */
function markdownFiles(): string[] {
  const top = ['README.md', 'CONTRIBUTING.md', 'CHANGELOG.md', 'libs/redis-streams/README.md'].filter((f) => existsSync(`${repoRoot}${f}`));
  const docs = (dir: string): string[] =>
    readdirSync(`${repoRoot}${dir}`, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? docs(`${dir}/${e.name}`) : e.name.endsWith('.md') ? [`${dir}/${e.name}`] : [],
    );
  return [...top, ...docs('docs')];
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');

function anchorsOf(file: string): Set<string> {
  const text = readFileSync(`${repoRoot}${file}`, 'utf8').replace(/```[\s\S]*?```/g, '');
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map(([, h]) => slug(h!)));
}

describe('the docs links', () => {
  it('every relative link of README, CONTRIBUTING, CHANGELOG and docs/ points at a file that exists, and at a heading it has', () => {
    const dead: string[] = [];
    for (const file of markdownFiles()) {
      const text = readFileSync(`${repoRoot}${file}`, 'utf8').replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = path === '' ? file : posix.normalize(posix.join(posix.dirname(file), path));
        if (!existsSync(`${repoRoot}${resolved}`)) dead.push(`${file}: ${target} (no file ${resolved})`);
        else if (anchor !== undefined && resolved.endsWith('.md') && !anchorsOf(resolved).has(anchor))
          dead.push(`${file}: ${target} (no heading #${anchor} in ${resolved})`);
      }
    }
    expect(dead).toEqual([]);
  });
});
