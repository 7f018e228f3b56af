import { HandedEntries } from '../libs/redis-streams/src/consumer/custody/handed-entries.js';
import { DeliveryMarks } from '../libs/redis-streams/src/consumer/custody/delivery-marks.js';

/** The settings every test here shares (the default 1:3 lease), with the parts a test chooses. */
const depsOf = (commands: unknown, marks: DeliveryMarks, warn: (m: string) => void = () => undefined) => ({
  commands: commands as never,
  lease: { idsOn: () => new Set<string>() },
  marks,
  consumer: 'c',
  minIdleMs: 30_000,
  leaseRenewMs: 10_000,
  maxWaitingRetries: 100,
  logger: { log: () => undefined, warn, error: () => undefined },
});

/** Which streams each check asks Redis about (the script's answer: nothing pending). */
function looker() {
  const asked: string[][] = [];
  const handed = new HandedEntries(
    depsOf(
      {
        ownPending: async (pages: readonly { stream: string }[]) => {
          asked.at(-1)!.push(...pages.map((p) => p.stream));
          return pages.map(() => []);
        },
      },
      new DeliveryMarks(),
    ),
  );
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

  it('a reader of 10,000 streams looks at a share of them per check, every one within three checks at the default 1:3 lease (review finding: one script per stream per check)', async () => {
    const streams = Array.from({ length: 10_000 }, (_, i) => `s${i}`);
    const { check } = looker();
    const seen = new Map<string, number>();
    for (let n = 0; n < 3; n++) {
      const asked = await check(streams);
      expect(asked).toHaveLength(3334);
      for (const s of asked) seen.set(s, (seen.get(s) ?? 0) + 1);
    }
    // Every stream within the three (the third wraps to the first two again).
    expect(seen.size).toBe(10_000);
    expect([...seen.values()].filter((n) => n > 1)).toHaveLength(2);
  });

  it('a share that runs past the end wraps to the start, and a shrinking list does not skip its head', async () => {
    const { check } = looker();
    const many = Array.from({ length: 7_000 }, (_, i) => `s${i}`);
    const firsts: string[] = [];
    for (let n = 0; n < 3; n++) firsts.push((await check(many))[0]!);
    // 2,334 a check: the third runs past the end, and the fourth starts where it ended.
    expect(firsts).toEqual(['s0', 's2334', 's4668']);
    expect((await check(many))[0]).toBe('s2');
    const few = many.slice(0, 400);
    expect(await check(few)).toEqual(few);
  });
});

describe('HandedEntries: what it takes in', () => {
  const stream = 's';
  const row = (id: string, deliveryCount = 1) => ({ id, idleMs: 300, deliveryCount, dueInMs: undefined });
  function taker(pages: ReturnType<typeof row>[][]) {
    const marks = new DeliveryMarks();
    const said: string[] = [];
    // Each check's looks (the pass, and a look at a sighting's page) find the check's page.
    const ownPending = async (looks: readonly unknown[]) => {
      const page = pages.shift() ?? [];
      return looks.map(() => page);
    };
    const handed = new HandedEntries(depsOf({ ownPending }, marks, (m: string) => void said.push(m)));
    return { look: () => handed.look([stream]), marks, said };
  }

  it("an entry seen once pending here unknown is not taken in: it may be this consumer's own read whose reply is not processed yet (review finding: a batch of 100 ran twice under load)", async () => {
    // Seen unknown, then gone (the read's reply came, the entry was handled and acked): never owed here.
    const { look, marks, said } = taker([[row('1-0'), row('1-1')], []]);
    await look();
    expect(marks.owes(stream, '1-0')).toBe(false);
    await look();
    expect(marks.owes(stream, '1-0')).toBe(false);
    expect(said).toEqual([]);
  });

  it('an entry seen unknown by two looks in a row is taken in; one delivered again between them is looked at anew', async () => {
    const { look, marks, said } = taker([[row('1-0'), row('1-1')], [row('1-0'), row('1-1', 2)], [row('1-1', 2)]]);
    await look();
    await look();
    expect(marks.owes(stream, '1-0')).toBe(true);
    expect(marks.owes(stream, '1-1')).toBe(false);
    await look();
    expect(marks.owes(stream, '1-1')).toBe(true);
    expect(said).toHaveLength(2);
  });
});

describe('HandedEntries: a reader of many streams', () => {
  it('takes in an entry handed to it before the entry is idle minIdleMs, wherever its stream falls in the share (review finding: never, from 2,000 streams)', async () => {
    const streams = Array.from({ length: 3_000 }, (_, i) => `s${i}`);
    // Checks every leaseRenewMs / 2 = 5 s; the entry was XCLAIMed (idle 0) just before check `claimedAt`.
    for (const target of ['s0', 's1000', 's2999'])
      for (let claimedAt = 0; claimedAt < 4; claimedAt++) {
        let check = 0;
        const marks = new DeliveryMarks();
        const handed = new HandedEntries(
          depsOf(
            {
              ownPending: async (pages: readonly { stream: string }[]) =>
                pages.map(({ stream }) =>
                  stream === target && check >= claimedAt
                    ? [{ id: '1-0', idleMs: 300 + (check - claimedAt) * 5000, deliveryCount: 1, dueInMs: undefined }]
                    : [],
                ),
            },
            marks,
          ),
        );
        // Until its idle reaches minIdleMs (30 s: six checks after the claim).
        for (; check < claimedAt + 6 && !marks.owes(target, '1-0'); check++) await handed.look(streams);
        expect([target, claimedAt, marks.owes(target, '1-0')]).toEqual([target, claimedAt, true]);
      }
  });
});

describe('HandedEntries: behind its own long pending list', () => {
  /** A pending list of `owed` entries this consumer owes (failed, waiting), then one handed to it (XCLAIM) at `claimedAt`, paged as XPENDING pages. */
  function ownList(owed: number, handedIds: string[] = ['2-0']) {
    const marks = new DeliveryMarks();
    const rows = Array.from({ length: owed }, (_, i) => `1-${i}`);
    for (const id of rows) marks.takeIn('s', id, 1, performance.now(), 0);
    let check = 0;
    const handedId = handedIds[0]!;
    const claimedAt = { at: Number.POSITIVE_INFINITY };
    const claims = new Map<string, number>();
    const counts: number[] = [];
    const handed = new HandedEntries(
      depsOf(
        {
          ownPending: async (pages: readonly { stream: string; start: string; count: number }[]) =>
            pages.map(({ start, count }) => {
              counts.push(count);
              if (!claims.has(handedId) && check >= claimedAt.at) claims.set(handedId, claimedAt.at);
              const list = [...rows, ...handedIds.filter((id) => check >= (claims.get(id) ?? Infinity))];
              const from =
                start === '-' ? 0 : start.startsWith('(') ? list.indexOf(start.slice(1)) + 1 : list.findIndex((id) => id >= start);
              return list.slice(from, from + count).map((id) => ({
                id,
                idleMs: claims.has(id) ? 300 + (check - claims.get(id)!) * 5000 : 60_000,
                deliveryCount: 1,
                dueInMs: undefined,
              }));
            }),
        },
        marks,
      ),
    );
    return {
      marks,
      counts,
      handedId,
      claimAt: (n: number) => (claimedAt.at = n),
      hand: (id: string, at: number) => claims.set(id, at),
      look: async () => {
        await handed.look(['s']);
        check++;
      },
      get check() {
        return check;
      },
    };
  }

  it('takes in an entry handed to it behind 500 entries it owes, before it is idle minIdleMs, wherever the pages stand (review finding: never; lost to a DELCONSUMER)', async () => {
    for (let claimedAt = 1; claimedAt < 8; claimedAt++) {
      const list = ownList(500);
      list.claimAt(claimedAt);
      // Until its idle reaches minIdleMs (30 s: six checks after the claim).
      while (list.check < claimedAt + 6 && !list.marks.owes('s', list.handedId)) await list.look();
      expect([claimedAt, list.marks.owes('s', list.handedId)]).toEqual([claimedAt, true]);
      // Pages grow to see the whole list within a round, and stay bounded.
      expect(Math.max(...list.counts)).toBeLessThanOrEqual(1000);
    }
  });

  it('a second entry handed to it after the first was taken in, behind 2,500 owed entries, is taken in before minIdleMs too (review finding: the look at a sighting restarted the pass, and the next one took six checks)', async () => {
    const list = ownList(2500, ['2-0', '3-0']);
    list.claimAt(1);
    while (list.check < 7 && !list.marks.owes('s', '2-0')) await list.look();
    expect(list.marks.owes('s', '2-0')).toBe(true);
    const second = list.check + 1;
    list.hand('3-0', second);
    // Within a round and one check (four at the default 1:3), two to spare before it is idle minIdleMs (six).
    while (list.check < second + 6 && !list.marks.owes('s', '3-0')) await list.look();
    expect(list.marks.owes('s', '3-0')).toBe(true);
    expect(list.check - second).toBeLessThanOrEqual(4);
  });
});

describe('HandedEntries: a pending list that just grew', () => {
  const pad = (n: number) => `1-${String(n).padStart(6, '0')}`;

  it('an entry handed among 2,500 entries it owes, before any whole pass of the list, is taken in within a round and one check (review finding: the first pass paged from 100 up and took six checks; 7 of 10 lost to a DELCONSUMER at +4.5 s)', async () => {
    for (const position of [100, 1250, 2400])
      for (let claimedAt = 0; claimedAt < 6; claimedAt++) {
        const marks = new DeliveryMarks();
        // Owed: the even ids; the handed one stands among them at `position`.
        const owed = Array.from({ length: 2500 }, (_, i) => pad(2 * i));
        for (const id of owed) marks.takeIn('s', id, 1, performance.now(), 0);
        const handedId = pad(2 * position + 1);
        let check = 0;
        const handed = new HandedEntries(
          depsOf(
            {
              ownPending: async (pages: readonly { stream: string; start: string; count: number }[]) =>
                pages.map(({ start, count }) => {
                  const list = check >= claimedAt ? [...owed, handedId].sort() : owed;
                  const from =
                    start === '-'
                      ? 0
                      : start.startsWith('(')
                        ? list.findIndex((id) => id > start.slice(1))
                        : list.findIndex((id) => id >= start);
                  return (from < 0 ? [] : list.slice(from, from + count)).map((id) => ({
                    id,
                    idleMs: id === handedId ? 300 + (check - claimedAt) * 5000 : 60_000,
                    deliveryCount: 1,
                    dueInMs: undefined,
                  }));
                }),
            },
            marks,
          ),
        );
        // Until its idle reaches minIdleMs (30 s: six checks after the claim).
        while (check < claimedAt + 6 && !marks.owes('s', handedId)) {
          await handed.look(['s']);
          check++;
        }
        // Taken in by the check after the one that confirmed it: within a round (three checks at 1:3) and one more.
        expect({ position, claimedAt, checks: check - claimedAt, takenIn: marks.owes('s', handedId) }).toEqual({
          position,
          claimedAt,
          checks: expect.any(Number) as number,
          takenIn: true,
        });
        expect(check - claimedAt).toBeLessThanOrEqual(4);
      }
  });
});
