import { renderReports } from '../libs/redis-streams/src/cli/inspect.js';
import type { StreamReport } from '../libs/redis-streams/src/ops/stream-reports.js';

// The inspect text, from a report as inspectStreams builds it (its figures are Redis'; the words are the CLI's).

const report = (members: number): StreamReport =>
  ({
    stream: 'app:{orders:0}',
    length: 3,
    lastGeneratedId: '3-0',
    deadLetters: [],
    idempotency: null,
    delayed: { waiting: 0, nextDueInMs: null },
    groups: [
      {
        name: 'g',
        lag: 0,
        pending: 0,
        lastDeliveredId: '3-0',
        consumers: [],
        retryStateError: null,
        retryWaiting: 0,
        retryDue: 0,
        ordering: { consumer: 'w1', epoch: 4, leaseMs: 9000, members },
      },
    ],
  }) as unknown as StreamReport;

describe('inspect text', () => {
  it('an ordered stream shared by one member says "1 member shares", two "2 members share" (issue 51)', () => {
    expect(renderReports([report(1)])).toContain('; 1 member shares the partitions)');
    expect(renderReports([report(2)])).toContain('; 2 members share the partitions)');
  });
});
