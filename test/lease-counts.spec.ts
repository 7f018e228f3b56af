import { Logger } from '@nestjs/common';
import { Lease } from '../libs/redis-streams/src/consumer/lease.js';
import type { StreamCommands } from '../libs/redis-streams/src/redis/stream-commands.js';
import type { StreamEntry } from '../libs/redis-streams/src/redis/stream-entry.js';

const entry = (id: string): StreamEntry => ({ stream: 's', id, fields: ['k', 'v'], deliveryCount: 1 });

describe('Lease bookkeeping (pure: no command is sent)', () => {
  // A group re-created under a parked read-ahead delivers ids already in hand again, as new objects.
  it('counts an id held twice (two objects) once, and lists it once', () => {
    const lease = new Lease({} as StreamCommands, 'c', 1000, new Logger('test'));
    const [a, b] = [entry('1-0'), entry('2-0')];
    lease.hold([a, b]);
    lease.hold([entry('1-0'), entry('2-0')]);
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
});
