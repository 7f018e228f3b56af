/** A batch handler unit-tested with hand-made entries whose context is a test double (a plain object, a mock) can still build its BatchFailure. */
import { BatchFailure, batchFailures } from '../libs/redis-streams/src/batch.js';

describe('BatchFailure with a test double as context', () => {
  it('a handler unit test that names an entry with a stub context still gets its BatchFailure', () => {
    const context = { getId: () => '1-0', getStream: () => 'orders' } as never;
    const entry = { payload: { order_id: '1' }, context };
    const make = () => new BatchFailure([{ entry, error: new Error('refused') }]);
    expect(make).not.toThrow();
    expect(batchFailures(make())?.get(context)).toBeInstanceOf(Error);
  });
});
