import { Logger } from '@nestjs/common';
import { Lease } from '../libs/redis-streams/src/consumer/custody/lease.js';
import type { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/stream-entry.js';

const entry = (id: string): StreamEntry => ({ stream: 's', id, fields: ['k', 'v'], deliveryCount: 1 });

describe('Lease bookkeeping (pure: no command is sent)', () => {
  // A group re-created under a parked read-ahead delivers ids already in hand again, as new objects.
  it('counts an id held twice (two objects) once, and lists it once', () => {
    const lease = new Lease({} as StreamCommands, 'c', 1000, new Logger('test'));
    const [a, b] = [entry('1-0'), entry('2-0')];
    lease.hold([a, b], performance.now());
    lease.hold([entry('1-0'), entry('2-0')], performance.now());
    expect(lease.counts()).toEqual(new Map([['s', 2]]));
    expect(lease.entries()).toEqual([
      { stream: 's', id: '1-0' },
      { stream: 's', id: '2-0' },
    ]);
    expect(lease.heldIds([a])).toEqual(new Map([['s', ['2-0']]]));
    lease.drop(a);
    // The other object of 1-0 is still in hand.
    expect(lease.counts()).toEqual(new Map([['s', 2]]));
  });

  it('tracks each entry by its own mark: dropped one by one, taken over by a later hold, listed by stream, and gone once the last is dropped', () => {
    const lease = new Lease({} as StreamCommands, 'c', 1000, new Logger('test'));
    const other = (id: string): StreamEntry => ({ stream: 't', id, fields: ['k', 'v'], deliveryCount: 1 });
    const [a, b, c] = [entry('1-0'), entry('2-0'), entry('3-0')];
    const x = other('9-0');
    // Runs of two streams in one fetch (a multi-stream read).
    lease.hold([a, b, x, c], performance.now());
    expect(lease.counts()).toEqual(
      new Map([
        ['s', 3],
        ['t', 1],
      ]),
    );
    expect(lease.idsOn('s')).toEqual(new Set(['1-0', '2-0', '3-0']));
    // b held again by a later fetch (the same object): counted once; dropping it once releases it.
    lease.hold([b], performance.now());
    expect(lease.counts().get('s')).toBe(3);
    lease.drop(b);
    lease.drop(b);
    expect(lease.heldIds()).toEqual(
      new Map([
        ['s', ['1-0', '3-0']],
        ['t', ['9-0']],
      ]),
    );
    lease.drop(a);
    lease.drop(c);
    lease.drop(x);
    expect(lease.entries()).toEqual([]);
    expect([...lease.counts().values()].every((n) => n === 0)).toBe(true);
    // The same object twice in one fetch: one drop releases it.
    lease.hold([a, a], performance.now());
    expect(lease.entries()).toEqual([{ stream: 's', id: '1-0' }]);
    lease.drop(a);
    expect(lease.entries()).toEqual([]);
  });

  it('clear() forgets every entry; an entry dropped after it changes nothing, and one held again is held', () => {
    const lease = new Lease({} as StreamCommands, 'c', 1000, new Logger('test'));
    const [a, b] = [entry('1-0'), entry('2-0')];
    lease.hold([a, b], performance.now());
    lease.clear();
    expect(lease.entries()).toEqual([]);
    lease.hold([b], performance.now());
    // a's ack lands after the restart: it must not release b.
    lease.drop(a);
    expect(lease.entries()).toEqual([{ stream: 's', id: '2-0' }]);
    lease.drop(b);
    expect(lease.entries()).toEqual([]);
  });
});
