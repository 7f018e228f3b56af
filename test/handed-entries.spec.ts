import { HandedEntries } from '../libs/redis-streams/src/consumer/handed-entries.js';
import { DeliveryMarks } from '../libs/redis-streams/src/consumer/delivery-marks.js';

/** Which streams each check asks Redis about (the script's answer: nothing pending). */
function looker() {
  const asked: string[][] = [];
  const handed = new HandedEntries({
    commands: {
      ownPending: async (pages: readonly { stream: string }[]) => {
        asked.at(-1)!.push(...pages.map((p) => p.stream));
        return pages.map(() => []);
      },
    } as never,
    lease: { idsOn: () => new Set<string>() },
    marks: new DeliveryMarks(),
    consumer: 'c',
    minIdleMs: 30_000,
    maxWaitingRetries: 100,
    logger: { log: () => undefined, warn: () => undefined, error: () => undefined },
  });
  const check = async (streams: readonly string[]) => {
    asked.push([]);
    await handed.look(streams);
    return asked.at(-1)!;
  };
  return { check };
}

describe('HandedEntries: what one check costs', () => {
  it('a reader of a few hundred streams looks at each of them every check', async () => {
    const streams = Array.from({ length: 300 }, (_, i) => `s${i}`);
    const { check } = looker();
    expect(await check(streams)).toEqual(streams);
    expect(await check(streams)).toEqual(streams);
  });

  it('a reader of 10,000 streams looks at a tenth of them per check, every one within ten checks (review finding: one script per stream per check)', async () => {
    const streams = Array.from({ length: 10_000 }, (_, i) => `s${i}`);
    const { check } = looker();
    const seen = new Map<string, number>();
    for (let n = 0; n < 10; n++) {
      const asked = await check(streams);
      expect(asked).toHaveLength(1000);
      for (const s of asked) seen.set(s, (seen.get(s) ?? 0) + 1);
    }
    expect(seen.size).toBe(10_000);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
  });

  it('a share that runs past the end wraps to the start, and a shrinking list does not skip its head', async () => {
    const { check } = looker();
    const many = Array.from({ length: 7_000 }, (_, i) => `s${i}`);
    const firsts: string[] = [];
    for (let n = 0; n < 10; n++) firsts.push((await check(many))[0]!);
    // 700 a check: the tenth starts at 6,300; the eleventh wraps to 0.
    expect(firsts.slice(0, 3)).toEqual(['s0', 's700', 's1400']);
    expect((await check(many))[0]).toBe('s0');
    const few = many.slice(0, 400);
    expect(await check(few)).toEqual(few);
  });
});
