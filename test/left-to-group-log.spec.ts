import { LEFT_TO_GROUP_LOG_EVERY_MS, LeftToGroupLog } from '../libs/redis-streams/src/consumer/custody/left-to-group-log.js';

const ids = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `${from + i}-0`);

describe('the warning for entries left to the group past maxWaitingRetries', () => {
  afterEach(() => vi.useRealTimers());

  it('names the distinct entries a sweep left, then logs once a minute per stream, or when their number doubles', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const lines: string[] = [];
    const log = new LeftToGroupLog({ log: () => {}, warn: (m: string) => lines.push(m), error: () => {} }, 10, 500);
    // One sweep, in three rounds: one line for the 21 entries, none per round.
    log.note('s', ids(0, 1));
    log.note('s', ids(1, 11));
    log.note('s', ids(11, 21));
    log.note('t', ids(0, 3));
    log.note('u', ids(0, 1));
    log.flush();
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^21 entries taken from "s" .* maxWaitingRetries \(10\): left to the group/);
    expect(lines[1]).toMatch(/^3 entries taken from "t"/);
    expect(lines.pop()).toMatch(/^1 entry taken from "u" waits for a retry/);
    // The same 21 come back each minIdleMs: no line within the minute.
    for (let sweep = 0; sweep < 5; sweep++) {
      log.note('s', ids(0, 21));
      log.flush();
    }
    expect(lines).toHaveLength(2);
    // A minute on: the distinct entries again, and how often they were left.
    vi.advanceTimersByTime(LEFT_TO_GROUP_LOG_EVERY_MS);
    log.note('s', ids(0, 21));
    log.flush();
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/^21 entries taken from "s" .*\(left 126 times since the last such line\)/);
    // A second peer's wait list: logged at once, the number doubled.
    log.note('s', ids(0, 21));
    log.flush();
    expect(lines).toHaveLength(3);
    log.note('s', ids(100, 130));
    log.flush();
    expect(lines).toHaveLength(4);
    expect(lines[3]).toMatch(/^51 entries taken from "s"/);
    // Nothing left since the last line: nothing to say.
    vi.advanceTimersByTime(LEFT_TO_GROUP_LOG_EVERY_MS);
    log.flush();
    expect(lines).toHaveLength(4);
  });

  it('a sweep longer than minIdleMs: "so far" once, minIdleMs after the first entry left, then the total at its end', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const lines: string[] = [];
    const log = new LeftToGroupLog({ log: () => {}, warn: (m: string) => lines.push(m), error: () => {} }, 10, 500);
    // 200 rounds of 20 ms, 5 entries left in each, the stream in its sweep throughout.
    for (let round = 0; round < 200; round++) {
      log.note('s', ids(round * 5, round * 5 + 5));
      log.flush(() => false);
      vi.advanceTimersByTime(20);
    }
    expect(lines).toEqual([expect.stringMatching(/^130 entries taken from "s" so far \(this consumer's reclaim sweep goes on\)/)]);
    log.flush((stream) => stream === 's');
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^1000 entries taken from "s" wait for a retry.*\(left 870 times since the last such line\)/);
    // The next sweep brings the same 1,000 back: nothing new to say within the minute.
    log.note('s', ids(0, 1000));
    log.flush();
    expect(lines).toHaveLength(2);
  });

  it('short sweeps of the same entries, each in two rounds: one line a minute, never "so far"', () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const lines: string[] = [];
    const log = new LeftToGroupLog({ log: () => {}, warn: (m: string) => lines.push(m), error: () => {} }, 10, 500);
    log.note('s', ids(0, 21));
    log.flush();
    for (let t = 500; t <= LEFT_TO_GROUP_LOG_EVERY_MS; t += 500) {
      vi.advanceTimersByTime(500);
      log.note('s', ids(0, 10));
      log.flush(() => false);
      log.note('s', ids(10, 21));
      log.flush(() => true);
    }
    expect(lines).toHaveLength(2);
    expect(lines[1]).toMatch(/^21 entries taken from "s" wait for a retry.*\(left 2520 times since the last such line\)/);
  });
});
