// The dashboard page declares what it reads of the JSON API in its own folder (browser/api-replies.ts: the
// browser code cannot import the server's types, which bring Node's). These checks hold those declarations
// to what the server sends: a field renamed or retyped on the server fails `npm run typecheck` here.
import type {
  ConfigReply,
  ConsumerHealth,
  DeleteReply,
  PendingMoveReply,
  RedriveReply,
  DeadLetterStreamsReply,
  EntriesReply,
  EntryReply,
  LetterRow,
  OverviewReply,
  PendingReply,
  StreamRow,
  SchedulesReply,
  ScheduleRemoveReply,
  EntryStateReply,
  DelayedReply,
  DelayedEntryReply,
  DelayedChangeReply,
  RateLimitReply,
} from '../libs/redis-streams/src/dashboard/browser/api-replies.js';
import type {
  LettersDeleted,
  LettersRedriven,
  PendingMoved,
  ScheduleRemoved,
  DelayedChanged,
} from '../libs/redis-streams/src/dashboard/dashboard-actions.js';
import type { DashboardData, DeadLetterRow } from '../libs/redis-streams/src/dashboard/dashboard-data.js';
import type { DashboardConfig } from '../libs/redis-streams/src/dashboard/dashboard-http.js';
import type { RedisStreamsHealth } from '../libs/redis-streams/src/health/health.js';

/** What a read of DashboardData answers (null is the API's 404). */
type Answer<
  M extends
    'overview' | 'stream' | 'pending' | 'entries' | 'entry' | 'deadLetterStreams' | 'schedules' | 'entryState' | 'delayed' | 'delayedEntry',
> = NonNullable<Awaited<ReturnType<DashboardData[M]>>>;

describe("the page's view of the dashboard API", () => {
  it('is what the server answers, call by call', () => {
    expectTypeOf<Answer<'overview'>>().toExtend<OverviewReply>();
    expectTypeOf<Answer<'stream'>>().toExtend<StreamRow>();
    expectTypeOf<Answer<'pending'>>().toExtend<PendingReply>();
    expectTypeOf<Answer<'entries'>>().toExtend<EntriesReply>();
    expectTypeOf<Answer<'entry'>>().toExtend<EntryReply>();
    expectTypeOf<Answer<'deadLetterStreams'>>().toExtend<DeadLetterStreamsReply>();
    expectTypeOf<Answer<'schedules'>>().toExtend<SchedulesReply>();
    expectTypeOf<Answer<'entryState'>>().toExtend<EntryStateReply>();
    expectTypeOf<Answer<'delayed'>>().toExtend<DelayedReply>();
    expectTypeOf<Answer<'delayedEntry'>>().toExtend<DelayedEntryReply>();
    // A letter read from its dead-letter stream always has its id there (the type allows none for one not yet written).
    expectTypeOf<DeadLetterRow & { id: string }>().toExtend<LetterRow>();
    expectTypeOf<RedisStreamsHealth>().toExtend<ConsumerHealth>();
    // /api/rate-limit sends { limit }, null when no worker publishes one.
    expectTypeOf<{ limit: Awaited<ReturnType<DashboardData['rateLimit']>> }>().toExtend<RateLimitReply>();
  });

  it('is what the server answers to /api/config and to the actions (review finding: these four were never checked)', () => {
    // /api/config sends the config with `actions` filled in for the visitor.
    expectTypeOf<DashboardConfig & { actions: boolean }>().toExtend<ConfigReply>();
    expectTypeOf<PendingMoved>().toExtend<PendingMoveReply>();
    expectTypeOf<LettersRedriven>().toExtend<RedriveReply>();
    expectTypeOf<LettersDeleted>().toExtend<DeleteReply>();
    expectTypeOf<ScheduleRemoved>().toExtend<ScheduleRemoveReply>();
    expectTypeOf<DelayedChanged>().toExtend<DelayedChangeReply>();
  });
});
