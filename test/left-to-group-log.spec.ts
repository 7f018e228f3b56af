import { LEFT_TO_GROUP_LOG_EVERY_MS, LeftToGroupLog } from '../libs/redis-streams/src/consumer/left-to-group-log.js';

describe('the warning for entries left to the group past maxWaitingRetries', () => {
  afterEach(() => vi.useRealTimers());

  it('is logged once per stream a minute, then with how many were left meanwhile', () => {
    vi.useFakeTimers();
    const lines: string[] = [];
    const log = new LeftToGroupLog({ log: () => {}, warn: (m: string) => lines.push(m), error: () => {} }, 10);
    log.note('s', 1);
    log.note('s', 10);
    log.note('t', 3);
    log.note('s', 10);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/^1 entries taken from "s" .* maxWaitingRetries \(10\): left to the group/);
    expect(lines[1]).toMatch(/^3 entries taken from "t"/);
    vi.advanceTimersByTime(LEFT_TO_GROUP_LOG_EVERY_MS);
    log.note('s', 4);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatch(/^4 entries taken from "s" .*\(and 20 more since the last such line\)/);
    log.note('s', 4);
    expect(lines).toHaveLength(3);
  });
});
