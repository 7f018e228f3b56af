import type { StreamHealth } from 'nestjs-redis-streams';
import { patternFigures } from '../libs/redis-streams/src/health/pattern-figures.js';

const stream = (name: string, lag: number | null, pending: number | null): StreamHealth => ({
  stream: name,
  lag,
  pending,
  deadLetters: null,
  inHand: 0,
  lastBeatAgeMs: undefined,
  stuckEntries: 0,
});

const patternOf = (s: string): string | undefined => ({ 'a:orders': 'orders', 'a:{parts:0}': 'parts', 'a:{parts:1}': 'parts' })[s];

describe('patternFigures: what an autoscaler reads per pattern', () => {
  it('adds up a pattern’s streams, in the order the patterns come', () => {
    expect(patternFigures([stream('a:{parts:0}', 3, 1), stream('a:orders', 2, 0), stream('a:{parts:1}', 4, 2)], patternOf)).toEqual([
      { pattern: 'parts', streams: 2, lag: 7, pending: 3 },
      { pattern: 'orders', streams: 1, lag: 2, pending: 0 },
    ]);
  });

  it('one stream’s lag or pending unknown makes the pattern’s unknown: never a sum too small to scale on', () => {
    expect(patternFigures([stream('a:{parts:0}', 3, 1), stream('a:{parts:1}', null, 2)], patternOf)).toEqual([
      { pattern: 'parts', streams: 2, lag: null, pending: 3 },
    ]);
    expect(patternFigures([stream('a:{parts:0}', null, null), stream('a:{parts:1}', 5, 2)], patternOf)).toEqual([
      { pattern: 'parts', streams: 2, lag: null, pending: null },
    ]);
  });

  it('leaves out streams of no pattern', () => {
    expect(patternFigures([stream('elsewhere', 9, 9)], patternOf)).toEqual([]);
  });
});
