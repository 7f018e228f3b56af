/** What a consumer knows of its place in each stream (highest delivered, entries owed, scheduled retries), without Redis. */
import { DeliveryMarks } from '../libs/redis-streams/src/consumer/custody/delivery-marks.js';
import { markScheduled } from '../libs/redis-streams/src/consumer/settle/retry-schedule.js';
import type { SettledEvent, SettleOutcome } from '../libs/redis-streams/src/consumer/settle/settled-event.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';
import { waitFor } from './support/wait-for.js';

const entry = (id: string, stream = 's'): StreamEntry => ({ stream, id, fields: ['k', 'v'], deliveryCount: 1 });
const event = (id: string, outcome: SettleOutcome, extra: Partial<SettledEvent> = {}): SettledEvent => ({
  stream: 's',
  id,
  outcome,
  deliveryCount: 1,
  source: 'new',
  ...extra,
});
/** A failure with a time of its own (a retry policy's, a RetryLaterException's). */
const scheduled = (id: string, retryInMs: number, deliveryCount = 1): SettledEvent =>
  markScheduled(event(id, 'failed', { retryInMs, deliveryCount }));

describe('DeliveryMarks: the highest id delivered', () => {
  it('per stream, compared as ids (10-0 after 9-0), never lowered by an older delivery', () => {
    const marks = new DeliveryMarks();
    marks.delivered([entry('9-0'), entry('10-0'), entry('1-5', 't')]);
    expect(marks.highestOf('s')).toBe('10-0');
    expect(marks.highestOf('t')).toBe('1-5');
    marks.delivered([entry('2-0')]);
    expect(marks.highestOf('s')).toBe('10-0');
    marks.delivered([entry('1-10', 't')]);
    expect(marks.highestOf('t')).toBe('1-10');
    expect(marks.highestOf('u')).toBeUndefined();
  });

  it('forget(stream): nothing known of the old stream applies', () => {
    const marks = new DeliveryMarks();
    marks.delivered([entry('5-0')]);
    marks.settled(scheduled('5-0', 1000));
    marks.forget('s');
    expect(marks.highestOf('s')).toBeUndefined();
    expect(marks.owes('s', '5-0')).toBe(false);
    expect(marks.waiting).toBe(0);
  });
});

describe('DeliveryMarks: entries owed', () => {
  it('a failure is owed until a later outcome settles it; success and dead-letter owe nothing', () => {
    const marks = new DeliveryMarks();
    expect(marks.settled(event('1-0', 'acked'))).toBeUndefined();
    expect(marks.settled(event('2-0', 'dead-lettered'))).toBeUndefined();
    expect(marks.owes('s', '1-0') || marks.owes('s', '2-0')).toBe(false);
    // Without a schedule: owed, retried once idle (no retry time).
    expect(marks.settled(event('3-0', 'failed', { deliveryCount: 2 }))).toBeUndefined();
    expect(marks.owes('s', '3-0')).toBe(true);
    expect([marks.unscheduled, marks.waiting]).toEqual([1, 0]);
    expect(marks.owed('s', [], () => true)).toEqual([['3-0', 2, true]]);
    marks.settled(event('3-0', 'acked'));
    expect(marks.owes('s', '3-0')).toBe(false);
    expect(marks.unscheduled).toBe(0);
  });

  it('owed(stream, held) lists what it owes with counts, and what it holds with count 1', () => {
    const marks = new DeliveryMarks();
    marks.settled(event('1-0', 'failed', { deliveryCount: 3 }));
    // Whether a rejoin may take one back is the caller's rule for owed entries; a held one only with a lost group.
    expect(marks.owed('s', ['1-0', '2-0'], () => true)).toEqual([
      ['1-0', 3, true],
      ['2-0', 1, false],
    ]);
    expect(marks.owed('s', [], () => false)).toEqual([['1-0', 3, false]]);
  });

  it('keepOwned: after a recovery it owes exactly what is pending under it, scheduled retries keeping their time', () => {
    const marks = new DeliveryMarks();
    const retryAt = marks.settled(scheduled('1-0', 60_000))!;
    marks.settled(event('2-0', 'failed'));
    marks.settled(event('3-0', 'failed'));
    marks.keepOwned(
      's',
      [
        ['1-0', 1],
        ['2-0', 1],
        ['3-0', 1],
      ],
      ['1-0', '3-0'],
    );
    expect(['1-0', '2-0', '3-0'].map((id) => marks.owes('s', id))).toEqual([true, false, true]);
    expect(marks.waiting).toBe(1);
    expect(marks.nextRetryAt()).toBe(retryAt);
  });

  it('past 10,000 unscheduled failures on a stream, new ones are counted, not tracked (taken once)', () => {
    const marks = new DeliveryMarks();
    for (let i = 0; i < 10_000; i++) marks.settled(event(`${i}-0`, 'failed'));
    marks.settled(event('10000-0', 'failed'));
    marks.settled(event('10001-0', 'failed'));
    // One already owed fails again: still tracked.
    marks.settled(event('0-0', 'failed', { deliveryCount: 2 }));
    expect(marks.owes('s', '10000-0')).toBe(false);
    expect(marks.unscheduled).toBe(10_000);
    expect(marks.takeUntracked('s')).toBe(2);
    expect(marks.takeUntracked('s')).toBe(0);
    // A scheduled one is bounded by maxWaitingRetries instead: tracked.
    marks.settled(scheduled('20000-0', 1000));
    expect(marks.owes('s', '20000-0')).toBe(true);
  });
});

describe('DeliveryMarks: scheduled retries', () => {
  it('a scheduled failure waits; it is due at the time settled() returned, taken once', () => {
    const marks = new DeliveryMarks();
    const before = performance.now();
    const retryAt = marks.settled(scheduled('1-0', 5000, 2))!;
    expect(retryAt).toBeGreaterThanOrEqual(before + 5000);
    expect([marks.waiting, marks.unscheduled]).toEqual([1, 0]);
    expect(marks.nextRetryAt()).toBe(retryAt);
    expect(marks.takeDueRetries(retryAt - 1).size).toBe(0);
    const due = marks.takeDueRetries(retryAt);
    expect([...due.keys()]).toEqual(['s']);
    expect(due.get('s')!.map(([id, owed]) => [id, owed.count, owed.retryAt])).toEqual([['1-0', 2, retryAt]]);
    // Off the schedule (the audit claims it), still owed until settled.
    expect(marks.takeDueRetries(retryAt).size).toBe(0);
    expect(marks.nextRetryAt()).toBe(Infinity);
    expect(marks.owes('s', '1-0')).toBe(true);
  });

  it('a failure settled later than it was scheduled (after the rest of its batch) is due retryInMs after it was scheduled, as its record says', async () => {
    const marks = new DeliveryMarks();
    const before = performance.now();
    const failure = scheduled('1-0', 1000);
    const after = performance.now();
    // The rest of its batch runs before it is settled (see the batch settler's recording failures).
    await waitFor(() => performance.now() - after >= 300, { message: 'the rest of the batch', intervalMs: 10 });
    const retryAt = marks.settled(failure)!;
    // Before: due 1000 ms after the settle, 300 ms or more later than its record.
    expect(retryAt).toBeGreaterThanOrEqual(before + 1000);
    expect(retryAt).toBeLessThanOrEqual(after + 1000);
  });

  it('takes the due ones earliest first over every stream, and leaves the later ones', () => {
    const marks = new DeliveryMarks();
    const a = marks.settled(scheduled('1-0', 300))!;
    const c = marks.settled(scheduled('3-0', 10_000))!;
    const d = marks.settled(markScheduled(event('4-0', 'failed', { stream: 't', retryInMs: 100 })))!;
    expect(marks.nextRetryAt()).toBe(d);
    const due = marks.takeDueRetries(a);
    expect(due.get('s')!.map(([id]) => id)).toEqual(['1-0']);
    expect(due.get('t')!.map(([id]) => id)).toEqual(['4-0']);
    expect(marks.nextRetryAt()).toBe(c);
  });

  it('a rescheduled entry is due at its new time only; one settled meanwhile is not due at all', () => {
    const marks = new DeliveryMarks();
    const first = marks.settled(scheduled('1-0', 100))!;
    const later = marks.settled(scheduled('1-0', 50_000, 2))!;
    marks.settled(scheduled('2-0', 200));
    marks.settled(event('2-0', 'acked'));
    expect(marks.waiting).toBe(1);
    expect(marks.nextRetryAt()).toBe(later);
    expect(marks.takeDueRetries(first + 1000).size).toBe(0);
    expect(
      marks
        .takeDueRetries(later)
        .get('s')!
        .map(([id]) => id),
    ).toEqual(['1-0']);
  });

  it('forgetOwed ends the wait; rescheduleAll puts back what was taken but not claimed', () => {
    const marks = new DeliveryMarks();
    const a = marks.settled(scheduled('1-0', 100))!;
    marks.settled(scheduled('2-0', 100));
    marks.forgetOwed('s', '2-0');
    expect(marks.waiting).toBe(1);
    expect(
      marks
        .takeDueRetries(a + 1000)
        .get('s')!
        .map(([id]) => id),
    ).toEqual(['1-0']);
    // Redis failed the claim: back on the schedule, at the same time.
    marks.rescheduleAll();
    expect(marks.nextRetryAt()).toBe(a);
    expect(
      marks
        .takeDueRetries(a)
        .get('s')!
        .map(([id]) => id),
    ).toEqual(['1-0']);
  });

  it('adopt: a peer’s waiting entry becomes owed and waiting here, due in retryInMs', () => {
    const marks = new DeliveryMarks();
    const retryAt = marks.adopt('s', '7-0', 3, 2000);
    expect(marks.owes('s', '7-0')).toBe(true);
    expect(marks.waiting).toBe(1);
    expect(marks.nextRetryAt()).toBe(retryAt);
    expect(marks.owed('s', [], () => true)).toEqual([['7-0', 3, true]]);
  });
});
