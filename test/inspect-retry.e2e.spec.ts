import { aclUser } from './support/acl.js';
import { groupOnNewStream } from './support/backlog.js';
import { runCli } from './support/cli.js';
import { CLUSTER_MODE, retrySetKey } from './support/redis-server.js';
import { useRedis } from './support/use-redis.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';

const redis = useRedis();
const start = useApps();

interface Shown {
  id: string;
  state: string;
  retryInMs: number | null;
  retryDueAt: number | null;
}

/** Redis' clock in ms (the retry set's due times are on it). */
async function serverNow(): Promise<number> {
  const [s, us] = (await redis.client().time()) as unknown as [string, string];
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/**
 * A worker with a 60 s fixed backoff holding one failed entry (waiting for its retry) and one in a
 * hung handler; a consumer `dead` with no connection holding one entry, and one whose retry record
 * is past due (it died while the entry waited).
 */
/**
 * The gone consumer's name, unique: "connected" is read from connection names (group and consumer), and
 * another file on the shared cluster runs a live `g`/`dead` worker (consumer-liveness), which CI saw.
 */
const DEAD = `dead-${uniquePrefix().replace(/\W/g, '')}`;

async function scene() {
  const r = redis.client();
  const { prefix, key } = await groupOnNewStream(r);
  // Read by a raw client as `dead` before the worker starts: a consumer that never had a connection of this transport.
  const deadId = (await r.xadd(key, '*', 'data', '{"n":"dead"}'))!;
  const dueId = (await r.xadd(key, '*', 'data', '{"n":"due"}'))!;
  const reader = redis.newClient();
  await reader.xreadgroup('GROUP', 'g', DEAD, 'COUNT', 2, 'STREAMS', key, '>');
  reader.disconnect();
  await r.zadd(retrySetKey(key, 'g'), (await serverNow()) - 5000, dueId);
  const app = await start({
    connection: redis.connection,
    group: 'g',
    consumer: 'worker',
    keyPrefix: prefix,
    blockMs: 200,
    minIdleMs: 60_000,
    retry: { backoff: { type: 'fixed', delayMs: 60_000 } },
  });
  let release!: () => void;
  const hung = new Promise<void>((resolve) => (release = resolve));
  app.recorder.behavior = (call) => {
    const n = (call.payload as { n: string }).n;
    if (n === 'fail') throw new Error('downstream down');
    if (n === 'hang') return hung;
    return undefined;
  };
  const failId = (await r.xadd(key, '*', 'data', '{"n":"fail"}'))!;
  await waitFor(async () => (await r.zscore(retrySetKey(key, 'g'), failId)) !== null, {
    message: 'the failed entry to wait for its retry',
  });
  const hangId = (await r.xadd(key, '*', 'data', '{"n":"hang"}'))!;
  await waitFor(() => app.recorder.idsOf().includes(hangId), { message: 'the hung handler to start' });
  return { prefix, key, deadId, dueId, failId, hangId, release };
}

describe('redis-streams inspect: retries, live handlers, consumers gone', () => {
  it('tells an entry waiting for its retry from one in a live handler and from one whose consumer is gone', async () => {
    const { key, deadId, dueId, failId, hangId, release } = await scene();
    try {
      const json = await runCli(redis, ['inspect', key, '--json']);
      expect(json.code, json.stderr).toBe(0);
      const [report] = JSON.parse(json.stdout) as any[];
      const consumers = Object.fromEntries((report.groups[0].consumers as any[]).map((c) => [c.name, c]));
      const worker = Object.fromEntries((consumers.worker.pendingEntries as Shown[]).map((p) => [p.id, p]));
      expect(worker[failId]).toMatchObject({ state: 'retry-waiting' });
      expect(worker[failId]!.retryInMs).toBeGreaterThan(0);
      expect(worker[failId]!.retryInMs).toBeLessThanOrEqual(60_000);
      expect(worker[hangId]).toMatchObject({ state: 'live', retryInMs: null, retryDueAt: null });
      const dead = Object.fromEntries((consumers[DEAD].pendingEntries as Shown[]).map((p) => [p.id, p]));
      expect(dead[deadId]).toMatchObject({ state: 'consumer-gone', retryInMs: null });
      expect(dead[dueId]).toMatchObject({ state: 'retry-due' });
      expect(dead[dueId]!.retryInMs).toBeLessThanOrEqual(-5000);
      expect(consumers.worker).toMatchObject({ pending: 2, connected: true });
      expect(report.groups[0]).toMatchObject({ retryWaiting: 1, retryDue: 1, retryStateError: null });

      const text = await runCli(redis, ['inspect', key]);
      expect(text.stdout).toMatch(
        new RegExp(`\\n {6}${failId} {2}delivery 1 {2}idle .* {2}waiting for its retry in \\d+(\\.\\d)? s \\(due `),
      );
      expect(text.stdout).toMatch(new RegExp(`\\n {6}${hangId} {2}delivery 1 {2}idle .* {2}in a live handler\\n`));
      expect(text.stdout).toMatch(new RegExp(`\\n {6}${deadId} {2}delivery 1 {2}idle .* {2}consumer gone: `));
      expect(text.stdout).toMatch(new RegExp(`\\n {6}${dueId} {2}delivery 1 {2}idle .* {2}retry due \\d+(\\.\\d)? s ago; consumer gone: `));
      expect(text.stdout).toMatch(/group g .* {2}retries waiting 1, due 1\n/);
      expect(text.stdout).toMatch(new RegExp(`attention: "${DEAD}" has no connection and 1 entry shown waits for its retry`));
    } finally {
      release();
    }
  }, 30_000);

  it.skipIf(CLUSTER_MODE)(
    'says "retry state unknown (NOPERM …)" and still reports when the retry set may not be read',
    async () => {
      const { prefix, key, failId, hangId, release } = await scene();
      try {
        const rules = [
          'on',
          '~app:*',
          '~{app:*',
          '-@all',
          '+hello',
          '+info',
          '+ping',
          '+quit',
          '+select',
          '+xinfo|stream',
          '+xinfo|groups',
          '+xinfo|consumers',
        ];
        const user = await aclUser(redis.client(), redis.port, `inspector-${prefix.slice(2, 10)}`, prefix, [
          ...rules,
          '+xpending',
          '+scan',
          '+client|list',
          '+exists',
          '+xlen',
          '+xrange',
          '>pw',
        ]);
        const url = `redis://${user.username}:pw@127.0.0.1:${redis.port}`;
        const json = await runCli(redis, ['inspect', key, '--json', '--url', url]);
        expect(json.code, json.stderr).toBe(0);
        const [report] = JSON.parse(json.stdout) as any[];
        expect(report.groups[0].retryStateError).toMatch(/^NOPERM/);
        const worker = Object.fromEntries(
          (report.groups[0].consumers.find((c: any) => c.name === 'worker').pendingEntries as Shown[]).map((p) => [p.id, p]),
        );
        expect(worker[failId]).toMatchObject({ state: 'unknown' });
        expect(worker[hangId]).toMatchObject({ state: 'unknown' });
        const text = await runCli(redis, ['inspect', key, '--url', url]);
        expect(text.code).toBe(0);
        expect(text.stdout).toMatch(/group g .* {2}retry state unknown \(NOPERM /);
      } finally {
        release();
      }
    },
    30_000,
  );
});
