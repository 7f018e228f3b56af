import { readFileSync } from 'node:fs';
import { repoRoot } from './support/built.js';

const EXAMPLE = 'test/guide-testing.e2e.spec.ts';

/** The ```ts blocks of a markdown file whose first line is `// <path>`. */
const blocksNamed = (markdown: string, path: string): string[] =>
  [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map(([, code]) => code!).filter((code) => code.startsWith(`// ${path}\n`));

describe('docs/guide/testing.md', () => {
  it(`embeds ${EXAMPLE} word for word, so the guide's example is the test CI runs`, () => {
    const guide = readFileSync(`${repoRoot}docs/guide/testing.md`, 'utf8');
    const example = readFileSync(`${repoRoot}${EXAMPLE}`, 'utf8');
    expect(blocksNamed(guide, EXAMPLE)).toEqual([example]);
  });
});
