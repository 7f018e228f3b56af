import { rateLimitNamesOf } from '../libs/redis-streams/src/dashboard/rate-limit-view.js';
import { partitionKeys } from '../libs/redis-streams/src/partitions.js';
import { priorityStreamOf } from '../libs/redis-streams/src/key-names.js';

describe("the names a stream's rate limit may be kept under", () => {
  it("a plain stream's own; a partition's pattern's; a priority level's base's (one node and a cluster)", () => {
    expect(rateLimitNamesOf('app:mail')).toEqual(['app:mail']);
    for (const key of partitionKeys('app:', 'orders', 4)) expect(rateLimitNamesOf(key)).toContain('app:orders');
    for (const onCluster of [false, true]) expect(rateLimitNamesOf(priorityStreamOf('app:mail', 2, onCluster))).toContain('app:mail');
    // Only candidates: a name answers only when a worker published a limit under it.
    expect(rateLimitNamesOf('x{tenant:1}')).toEqual(['x{tenant:1}', 'xtenant']);
  });
});
