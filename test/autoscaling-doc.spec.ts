import { readFileSync } from 'node:fs';
import { partitionKeys } from 'nestjs-redis-streams';
import { repoRoot } from './support/built.js';

// docs/guide/autoscaling.md's ScaledObjects: the keys they name are the ones the library reads, and their
// shape is what KEDA takes (no YAML parser among the dependencies: a line-wise check of the subset they use).

const guide = readFileSync(`${repoRoot}docs/guide/autoscaling.md`, 'utf8');
const blocks = [...guide.matchAll(/```yaml\n([\s\S]*?)```/g)].map(([, yaml]) => yaml!);

/** `key: value` lines (a list item's first key too), the value unquoted as YAML reads it; quoted: whether it was. */
function entries(yaml: string): { key: string; value: string; quoted: boolean }[] {
  return [...yaml.matchAll(/^\s*(?:- )?([\w]+): (.+)$/gm)].map(([, key, raw]) => {
    const quoted = /^(".*"|'.*')$/.test(raw!);
    return { key: key!, value: quoted ? raw!.slice(1, -1) : raw!, quoted };
  });
}

describe('the ScaledObjects of docs/guide/autoscaling.md', () => {
  it('are ScaledObjects of KEDA, indented with spaces by twos, every trigger value a string', () => {
    expect(blocks).toHaveLength(3);
    for (const yaml of blocks) {
      expect(yaml).toMatch(/^apiVersion: keda\.sh\/v1alpha1$/m);
      expect(yaml).toMatch(/^kind: ScaledObject$/m);
      expect(yaml).not.toMatch(/\t/);
      for (const line of yaml.split('\n')) expect(/^ */.exec(line)![0].length % 2 === 0, line).toBe(true);
      // Trigger metadata are strings to KEDA: a number or a word YAML would read otherwise must be quoted.
      const triggers = yaml.slice(yaml.indexOf('triggers:'));
      for (const { key, value, quoted } of entries(triggers))
        if (/^[\d.]+$|^(true|false)$/.test(value) || /[{}#:]/.test(value)) expect(quoted, `${key}: ${value}`).toBe(true);
    }
  });

  it('name the keys the library reads: keyPrefix + pattern, and <keyPrefix>{<pattern>:<i>} per partition', () => {
    const streams = (yaml: string) =>
      entries(yaml)
        .filter((e) => e.key === 'stream')
        .map((e) => e.value);
    expect(streams(blocks[0]!)).toEqual(['app:orders']);
    expect(streams(blocks[1]!)).toEqual(partitionKeys('app:', 'orders', 4));
    for (const yaml of blocks.slice(0, 2))
      expect(
        new Set(
          entries(yaml)
            .filter((e) => e.key === 'consumerGroup')
            .map((e) => e.value),
        ),
      ).toEqual(new Set(['orders-workers']));
  });

  it('read the metrics-api figure by the path test/autoscaling.e2e.spec.ts resolves', () => {
    expect(entries(blocks[2]!).find((e) => e.key === 'valueLocation')?.value).toBe('patterns.#(pattern=="orders").lag');
  });
});
