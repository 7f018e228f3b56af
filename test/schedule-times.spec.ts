import { describe, expect, it } from 'vitest';
import { fireDecision, MISSED_AFTER_MS, nextFireAfter, type ScheduleTimes } from '../libs/redis-streams/src/schedule-times.js';
import { resolveSchedule } from '../libs/redis-streams/src/options/schedule-options.js';
import { InvalidOptionError } from '../libs/redis-streams/src/options/validate.js';

const at = (iso: string) => new Date(iso).getTime();
const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());

/** The first `n` fires strictly after `from`. */
function fires(times: ScheduleTimes, from: string, n: number): (string | undefined)[] {
  const out: (string | undefined)[] = [];
  let t = at(from);
  for (let i = 0; i < n; i++) {
    const next = nextFireAfter(times, t);
    out.push(iso(next));
    if (next === undefined) break;
    t = next;
  }
  return out;
}

const berlin = (cron: string): ScheduleTimes => ({ timing: { cron, tz: 'Europe/Berlin' } });

describe('next fire times', () => {
  it('spring forward in Berlin (2026-03-29, 02:00 → 03:00 CEST): a skipped local time fires at the jump, once', () => {
    expect(fires(berlin('30 2 * * *'), '2026-03-27T12:00:00Z', 4)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST, the moment of the jump
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
      '2026-03-31T00:30:00.000Z',
    ]);
    // A time after the gap is not moved: 03:30 CEST.
    expect(fires(berlin('30 3 * * *'), '2026-03-28T12:00:00Z', 1)).toEqual(['2026-03-29T01:30:00.000Z']);
  });

  it('fall back in Berlin (2026-10-25, 03:00 CEST → 02:00 CET): a repeated fixed local time fires once, at the first', () => {
    expect(fires(berlin('30 2 * * *'), '2026-10-24T12:00:00Z', 3)).toEqual([
      '2026-10-25T00:30:00.000Z', // 02:30 CEST; not again at 02:30 CET (01:30Z)
      '2026-10-26T01:30:00.000Z', // 02:30 CET
      '2026-10-27T01:30:00.000Z',
    ]);
  });

  it('every 15 minutes across the fall-back runs on real time: both passes of the repeated hour, 15 min apart', () => {
    const list = fires(berlin('*/15 * * * *'), '2026-10-24T23:50:00Z', 14);
    expect(list[0]).toBe('2026-10-25T00:00:00.000Z'); // 02:00 CEST
    const ms = list.map((s) => at(s!));
    for (let i = 1; i < ms.length; i++) expect(ms[i]! - ms[i - 1]!).toBe(15 * 60_000);
    // 02:00–02:45 local twice: 8 fires between 00:00Z and 01:45Z.
    expect(list.filter((s) => s! >= '2026-10-25T00:00' && s! < '2026-10-25T02:00').length).toBe(8);
  });

  it('a cron without tz is UTC; 6 fields take seconds first', () => {
    expect(fires({ timing: { cron: '0 9 * * 1' } }, '2026-12-05T00:00:00Z', 1)).toEqual(['2026-12-07T09:00:00.000Z']);
    expect(fires({ timing: { cron: '*/20 * * * * *' } }, '2026-12-05T00:00:01Z', 2)).toEqual([
      '2026-12-05T00:00:20.000Z',
      '2026-12-05T00:00:40.000Z',
    ]);
  });

  it('every: on Unix multiples, or startAt + k × every; startAt and endAt inclusive', () => {
    expect(nextFireAfter({ timing: { every: 1000 } }, 12_345)).toBe(13_000);
    expect(nextFireAfter({ timing: { every: 1000 } }, 13_000)).toBe(14_000);
    const times: ScheduleTimes = { timing: { every: 1000 }, startAt: 10_500, endAt: 12_500 };
    expect(nextFireAfter(times, 0)).toBe(10_500);
    expect(nextFireAfter(times, 10_499)).toBe(10_500);
    expect(nextFireAfter(times, 10_500)).toBe(11_500);
    expect(nextFireAfter(times, 11_500)).toBe(12_500);
    expect(nextFireAfter(times, 12_500)).toBeUndefined();
    const cron: ScheduleTimes = { timing: { cron: '0 * * * *' }, startAt: at('2026-12-05T10:00:00Z'), endAt: at('2026-12-05T12:00:00Z') };
    expect(fires(cron, '2026-12-01T00:00:00Z', 4)).toEqual([
      '2026-12-05T10:00:00.000Z',
      '2026-12-05T11:00:00.000Z',
      '2026-12-05T12:00:00.000Z',
      undefined,
    ]);
  });

  it("catch-up: on time fires and moves on from the fire; missed fires once ('once') or not ('skip'), then the first after now", () => {
    const every: ScheduleTimes = { timing: { every: 1000 } };
    expect(fireDecision(every, 'skip', 10_000, 10_200)).toEqual({ fire: true, next: 11_000 });
    // Late, but within MISSED_AFTER_MS: only late, fires as usual (the next may be late too: it fires at the next look).
    expect(fireDecision(every, 'skip', 10_000, 10_000 + MISSED_AFTER_MS)).toEqual({ fire: true, next: 11_000 });
    expect(fireDecision(every, 'once', 10_000, 60_500)).toEqual({ fire: true, next: 61_000 });
    expect(fireDecision(every, 'skip', 10_000, 60_500)).toEqual({ fire: false, next: 61_000 });
    // The last fire: none left after it.
    expect(fireDecision({ timing: { every: 1000 }, endAt: 10_000 }, 'once', 10_000, 10_001)).toEqual({ fire: true, next: undefined });
    expect(fireDecision({ timing: { every: 1000 }, endAt: 9_000 }, 'once', 10_000, 10_001)).toEqual({ fire: false, next: undefined });
  });
});

describe('schedule options', () => {
  const refused = (spec: unknown, option: string, message: RegExp) => {
    let err: unknown;
    try {
      resolveSchedule(spec);
    } catch (e) {
      err = e;
    }
    expect(err, JSON.stringify(spec)).toBeInstanceOf(InvalidOptionError);
    expect((err as InvalidOptionError).option).toBe(option);
    expect((err as Error).message).toMatch(message);
  };

  it('names each option in its message', () => {
    refused(null, 'schedule', /must be an object/);
    refused({}, 'every', /needs every \(ms\) or cron/);
    refused({ every: 1000, cron: '* * * * *' }, 'every', /not both/);
    refused({ every: 1.5 }, 'every', /whole number of ms from 10/);
    refused({ every: 1000, tz: 'Europe/Berlin' }, 'tz', /cron only/);
    refused({ cron: '' }, 'cron', /must be a cron expression/);
    refused({ cron: '* * *' }, 'cron', /not a cron expression of 5 or 6 fields/);
    refused({ cron: '0 0 30 2 *' }, 'cron', /not a cron expression/);
    refused({ cron: '0 3 * * *', tz: 'Europe/Nowhere' }, 'tz', /IANA time zone/);
    refused({ every: 1000, startAt: -1 }, 'startAt', /Date or whole Unix ms/);
    refused({ every: 1000, endAt: 'tomorrow' }, 'endAt', /Date or whole Unix ms/);
    refused({ every: 1000, startAt: 5, endAt: 4 }, 'endAt', /not be before startAt/);
    refused({ every: 1000, catchUp: 'all' }, 'catchUp', /'once' or 'skip'/);
    refused({ every: 1000, headers: [] }, 'headers', /object of string values/);
    refused({ every: 1000, headers: { a: 1 } }, 'headers.a', /must be a string/);
    refused({ every: 1000, partitionKey: 7 }, 'partitionKey', /must be a string/);
    refused({ every: 1000, evry: 1 }, 'evry', /unknown option/);
  });

  it('takes the defaults: catch up once, no headers', () => {
    expect(resolveSchedule({ every: 1000 })).toEqual({
      timing: { every: 1000 },
      catchUp: 'once',
      payload: undefined,
      headers: {},
      partitionKey: undefined,
    });
    expect(resolveSchedule({ cron: '0 3 * * *', tz: 'Europe/Berlin', startAt: new Date(5) })).toMatchObject({
      timing: { cron: '0 3 * * *', tz: 'Europe/Berlin' },
      startAt: 5,
    });
  });
});
