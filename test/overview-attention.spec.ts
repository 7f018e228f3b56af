// The overview's attention grouping (dashboard/overview-attention.ts), a pure function: which keys count as one
// pattern's partitions.
import { groupedAttention, type StreamFindings } from '../libs/redis-streams/src/dashboard/overview-attention.js';

const dead = (stream: string, count: number): StreamFindings => ({
  stream,
  findings: [{ text: `${count} dead letters in ${stream}:dead`, kind: 'dead', key: `${stream}:dead`, count }],
  deadLetters: [{ stream: `${stream}:dead`, length: count }],
});

describe('attention lines grouped per pattern', () => {
  it("a pattern's partitions 0..n share a line; user keys shaped like partitions that are not 0..n keep their own (review finding)", () => {
    const grouped = groupedAttention([dead('app:{orders:0}', 1), dead('app:{orders:1}', 2)], 30_000);
    expect(grouped).toHaveLength(1);
    expect(grouped[0]!.text).toMatch(/^app:\{orders:\*\} \(partitions 0–1\)/);
    // Two tenants' streams, not partitions: each its own line.
    const users = groupedAttention([dead('x{tenant:1}', 1), dead('x{tenant:22}', 1)], 30_000);
    expect(users.map((i) => i.text.split(':')[0])).toEqual(['x{tenant', 'x{tenant']);
    expect(users.map((i) => i.text)).toEqual([expect.stringMatching(/^x\{tenant:1\}: /), expect.stringMatching(/^x\{tenant:22\}: /)]);
  });
});
