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

/** The docs whose TypeScript blocks must compile: the two READMEs and every page of the guide. */
const COMPILED_DOCS = () => [
  'README.md',
  'libs/redis-streams/README.md',
  ...readdirSync(`${repoRoot}docs/guide`)
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/guide/${f}`),
];

/** A doc's folder under the compile directory. */
const folderOf = (doc: string) => doc.replace(/[/.]/g, '_');

/**
 * Type-checks the blocks as one app would: strict, ESM (nodenext), decorators with metadata, the built
 * package; every doc in one tsc run (a tsc process costs 3–5 CPU-s), each in a folder of its own.
 * Resolves with each doc's block count and tsc's errors.
 */
function compile(docs: string[]): { blocks: Map<string, number>; errors: string } {
  // Inside the repository, so that 'nestjs-redis-streams' resolves to the workspace package (its built exports).
  const dir = `${repoRoot}dist/readme-snippets`;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const blocks = new Map<string, number>();
  for (const doc of docs) {
    const found = tsBlocks(readFileSync(`${repoRoot}${doc}`, 'utf8'));
    const sub = `${dir}/${folderOf(doc)}`;
    mkdirSync(sub, { recursive: true });
    for (const { file, code } of found) writeFileSync(`${sub}/${file}`, code);
    blocks.set(doc, found.length);
  }
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
    return { blocks, errors: '' };
  } catch (err) {
    const out = (err as { stdout?: string }).stdout;
    if (!out) throw err; // tsc did not run
    return { blocks, errors: out };
  }
}

/** tsc's error lines about one doc's blocks (each names its file, under the doc's folder). */
const errorsOf = (errors: string, doc: string) =>
  errors
    .split('\n')
    .filter((line) => line.startsWith(`${folderOf(doc)}/`) || line.includes(`/${folderOf(doc)}/`))
    .join('\n');

describe('the README code', () => {
  let compiled: ReturnType<typeof compile>;
  beforeAll(() => {
    requireBuilt('libs/redis-streams/dist/esm/index.d.ts');
    compiled = compile(COMPILED_DOCS());
    // A tsc process: 23 s of a loaded CI run, near the default 30 s.
  }, 90_000);

  it('compiles: every TypeScript block of README.md, as an app would write it', () => {
    expect(errorsOf(compiled.errors, 'README.md')).toBe('');
    expect(compiled.blocks.get('README.md')).toBeGreaterThanOrEqual(5);
  });

  it('compiles: every TypeScript block of the package README', () => {
    expect(errorsOf(compiled.errors, 'libs/redis-streams/README.md')).toBe('');
    expect(compiled.blocks.get('libs/redis-streams/README.md')).toBeGreaterThan(0);
  });

  it('compiles: every TypeScript block of the guide (docs/guide)', () => {
    const guide = COMPILED_DOCS().filter((d) => d.startsWith('docs/guide/'));
    expect(guide.map((doc) => errorsOf(compiled.errors, doc)).join('')).toBe('');
    expect(guide.reduce((n, doc) => n + compiled.blocks.get(doc)!, 0)).toBeGreaterThan(0);
  });

  it('compiles: tsc reported nothing outside the blocks either', () => {
    const known = COMPILED_DOCS()
      .map((doc) => errorsOf(compiled.errors, doc))
      .filter(Boolean)
      .join('\n');
    // An error's detail lines are indented under its first line, which names the file.
    const rest = compiled.errors.split('\n').filter((line) => /^\S/.test(line) && !known.includes(line));
    expect(rest).toEqual([]);
  });
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
