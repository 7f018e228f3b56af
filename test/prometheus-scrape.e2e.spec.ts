import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFixture } from './support/fixture-process.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';
import { useLeftoversAfterEach } from './support/leftovers-after-each.js';
import { waitFor } from './support/wait-for.js';
import { deadLetterKey, freePort } from './support/redis-server.js';
import { repoRoot } from './support/built.js';
import { PauseCommands } from '../libs/redis-streams/src/redis/intake/pause-commands.js';

// The monitoring pack against a real Prometheus (Debian's `prometheus`, 2.42, which .ci/run installs) scraping two
// replicas of one worker every second: every query of docs/monitoring/grafana-dashboard.json, as Grafana sends it for
// this stream, returns what Redis holds (lag, pending, dead letters) and the counts the replicas settled and sent,
// within a few scrapes of a change. The replicas' gauges are read from Redis at most GAUGE_STATS_MAX_AGE_MS (5 s) old.

const redis = useRedis();
const { children, dirs } = useLeftoversAfterEach();

type Sample = { metric: Record<string, string>; value: [number, string] };

const sortedJson = (o: object) => JSON.stringify(Object.entries(o).sort());

/** The board's queries for stream `stream` and group `g`, by panel title (a panel's several targets in order). */
function boardQueries(stream: string): Map<string, string[]> {
  const board = JSON.parse(readFileSync(join(repoRoot, 'docs/monitoring/grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  const escaped = stream.replace(/[.*+?^${}()|[\]\\]/g, '\\\\$&');
  return new Map(
    board.panels
      .filter((p) => p.targets?.length)
      .map((p) => [
        p.title,
        p.targets!.map((t) => t.expr.replaceAll('$stream', escaped).replaceAll('$group', 'g').replaceAll('$__rate_interval', '1m')),
      ]),
  );
}

async function startPrometheus(targets: string[], dir: string): Promise<(expr: string) => Promise<Sample[]>> {
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    JSON.stringify({
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      scrape_configs: [{ job_name: 'worker', static_configs: [{ targets }] }],
    }),
  );
  const proc = spawn(
    'prometheus',
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(proc);
  let out = '';
  proc.stdout.on('data', (d) => (out += d));
  proc.stderr.on('data', (d) => (out += d));
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/-/ready`).catch(() => undefined))?.ok === true || proc.exitCode !== null, {
    message: 'Prometheus ready',
    timeoutMs: 30_000,
  });
  if (proc.exitCode !== null) throw new Error(`prometheus exited: ${out}`);
  return async (expr) => {
    const res = await fetch(`${base}/api/v1/query?query=${encodeURIComponent(expr)}`);
    const body = (await res.json()) as { status: string; error?: string; data: { result: Sample[] } };
    if (body.status !== 'success') throw new Error(`query ${expr}: ${body.error}`);
    return body.data.result;
  };
}

describe('the monitoring pack against a real Prometheus scraping two replicas', () => {
  it("every panel's query returns what Redis holds and what the replicas counted, within a few scrapes", async () => {
    const prefix = uniquePrefix();
    const stream = `${prefix}jobs`;
    const dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
    dirs.push(dir);
    const release = join(dir, 'release');
    const conn = JSON.stringify(redis.connection);
    const ports = [await freePort(), await freePort(), await freePort()];
    // Prometheus first; the second replica produces once both are scraped, one entry every 100 ms (across scrapes).
    const query = await startPrometheus(
      ports.map((p) => `127.0.0.1:${p}`),
      dir,
    );
    const replicas = [
      await startFixture(children, 'metrics-worker.mjs', [conn, prefix, 'r1', String(ports[0]), release]),
      await startFixture(children, 'metrics-worker.mjs', [conn, prefix, 'r2', String(ports[1]), release, '20,3,2']),
    ];
    // Another group on the same stream (its own dead letters in the same dead-letter stream, its own held entries):
    // a panel that lost its group filter reads its figures too.
    await startFixture(children, 'metrics-worker.mjs', [conn, prefix, 'o1', String(ports[2]), release, '', 'g2']);
    const queries = boardQueries(stream);
    const one = async (title: string, i = 0) => query(queries.get(title)![i]!);
    const valueOf = (samples: Sample[]) => (samples.length === 1 ? Number(samples[0]!.value[1]) : NaN);
    const byLabel = (samples: Sample[], label: string) => Object.fromEntries(samples.map((s) => [s.metric[label], Number(s.value[1])]));
    const client = redis.client();
    const group = async (name = 'g') => {
      const rows = ((await client.xinfo('GROUPS', stream)) as unknown[][]).map((r) =>
        Object.fromEntries(r.flatMap((v, i) => (i % 2 === 0 ? [[String(v), r[i + 1]]] : []))),
      );
      const row = rows.find((r) => r.name === name)!;
      return { lag: Number(row.lag), pending: Number(row.pending), dead: await client.xlen(deadLetterKey(stream)) };
    };

    // Prometheus takes up to 5 s to start scraping (its discovery's updates): both replicas scraped, then produced.
    await waitFor(async () => valueOf(await query('sum(up)')) === 3, { message: 'the three replicas scraped', timeoutMs: 30_000 });
    writeFileSync(`${release}.produce`, '');
    // In each group 20 succeed, 3 dead-lettered, the rest held; then g paused, and 5 added that g does not read: lag 5.
    await waitFor(() => replicas[1]!.out().includes('produced\n'), { message: 'the entries produced' });
    let groups: unknown;
    await waitFor(
      async () => {
        const [g, g2] = [await group(), await group('g2')];
        groups = [g, g2];
        return g.pending === 2 && g2.pending >= 1 && g.dead === 6;
      },
      { message: 'two held in g, one or two in g2, six dead letters', progress: () => JSON.stringify(groups) },
    );
    await new PauseCommands(client).pause(stream, 'g', 'test');
    await waitFor(() => replicas.every((r) => r.out().includes(`"${stream}" paused for group "g"`)), { message: 'both replicas paused' });
    for (let i = 0; i < 5; i++) await client.xadd(stream, '*', 'data', JSON.stringify({ kind: 'ok', late: i }));
    const held = await group();
    expect(held).toEqual({ lag: 5, pending: 2, dead: 6 });

    // Each replica exports them: two series behind each figure (before this is seen, a sum over
    // the replicas would read right), counted once.
    for (const gauge of ['lag', 'pending', 'dead_letters'])
      await waitFor(
        async () =>
          (await query(`messaging_redis_streams_${gauge}{messaging_destination_name="${stream}", messaging_consumer_group_name="g"}`))
            .length === 2,
        {
          message: `both replicas to export ${gauge}`,
          timeoutMs: 30_000,
        },
      );

    // And the other group's replica its own (pending at least 1): a panel without its group filter would add it.
    await waitFor(
      async () =>
        valueOf(
          await query(`messaging_redis_streams_pending{messaging_destination_name="${stream}", messaging_consumer_group_name="g2"}`),
        ) >= 1,
      { message: "the other group's pending exported", timeoutMs: 30_000 },
    );

    // The group's figures, once however many replicas export them (the board before this read 10, 4 and 6).
    const figures = async () => ({
      lag: valueOf(await one('Lag (all streams)')),
      pending: valueOf(await one('Pending')),
      dead: valueOf(await one('Dead letters')),
      lagOf: byLabel(await one('Lag per stream'), 'messaging_destination_name')[stream],
      pendingOf: byLabel(await one('Pending per stream'), 'messaging_destination_name')[stream],
      deadOf: byLabel(await one('Dead letters per stream'), 'messaging_destination_name')[stream],
    });
    const expected = (g: { lag: number; pending: number; dead: number }) => ({
      lag: g.lag,
      pending: g.pending,
      dead: g.dead,
      lagOf: g.lag,
      pendingOf: g.pending,
      deadOf: g.dead,
    });
    let seen: unknown;
    await waitFor(async () => JSON.stringify((seen = await figures())) === JSON.stringify(expected(held)), {
      message: "the board's gauges to read what Redis holds",
      timeoutMs: 30_000,
      progress: () => JSON.stringify(seen),
    });
    // The rates: what the replicas counted, by outcome (the counters behind the panels' rate()), and the rates themselves.
    const counted = async (expr: string) => byLabel(await query(expr), 'messaging_redis_streams_outcome');
    const settled = () =>
      counted(
        `sum by (messaging_redis_streams_outcome) (messaging_redis_streams_consumed_messages_total{messaging_destination_name="${stream}", messaging_consumer_group_name="g"})`,
      );
    await waitFor(async () => sortedJson((seen = await settled())) === sortedJson({ acked: 20, 'dead-lettered': 3 }), {
      message: 'the settled counts',
      timeoutMs: 30_000,
      progress: () => JSON.stringify(seen),
    });
    expect(
      await counted(
        `sum by (messaging_redis_streams_outcome) (messaging_redis_streams_sent_messages_total{messaging_destination_name="${stream}"})`,
      ),
    ).toEqual({ sent: 25 });
    // The two held handlers: the oldest running for some seconds, none stuck yet; the figures fresh.
    expect(Object.values(byLabel(await one('Oldest running handler'), 'messaging_destination_name'))[0]).toBeGreaterThan(0);
    expect(valueOf(await one('Stuck handlers'))).toBe(0);
    expect(valueOf(await one('Figures age'))).toBeLessThanOrEqual(10);

    // A change is seen within a few scrapes: the held entries released (pending 0) and the stream resumed (lag 0).
    writeFileSync(release, '');
    await new PauseCommands(client).resume(stream, 'g');
    await waitFor(
      async () => JSON.stringify(await group()) === JSON.stringify({ lag: 0, pending: 0, dead: 6 }) && (await group('g2')).pending === 0,
      {
        message: 'all read and acked',
      },
    );
    await waitFor(async () => JSON.stringify((seen = await figures())) === JSON.stringify(expected({ lag: 0, pending: 0, dead: 6 })), {
      message: "the board's gauges to follow Redis",
      timeoutMs: 30_000,
      progress: () => JSON.stringify(seen),
    });
    // The released and resumed entries counted: acked 20 + 2 + 5.
    await waitFor(async () => sortedJson((seen = await settled())) === sortedJson({ acked: 27, 'dead-lettered': 3 }), {
      message: 'the settled counts after the release',
      timeoutMs: 30_000,
      progress: () => JSON.stringify(seen),
    });
    await waitFor(async () => valueOf(await one('Settled / s')) > 0, { message: 'a settle rate', timeoutMs: 30_000 });
    // Each replica's own rate added up over the replicas (a max would take one), evaluated at one instant.
    const perReplica = `sum by (instance) (rate(messaging_redis_streams_consumed_messages_total{messaging_destination_name="${stream}", messaging_consumer_group_name="g", messaging_redis_streams_outcome!="rate-limited"}[1m]))`;
    expect(Math.abs(valueOf(await query(`${queries.get('Settled / s')![0]!} - sum(${perReplica})`)))).toBeLessThan(1e-9);
    expect(Object.keys(byLabel(await one('Settled per second, by outcome'), 'messaging_redis_streams_outcome')).sort()).toEqual([
      'acked',
      'dead-lettered',
    ]);
    expect(Object.keys(byLabel(await one('Produced per second, by outcome'), 'messaging_redis_streams_outcome'))).toEqual(['sent']);
    // The latencies: a figure, not NaN, each quantile no less than the one before.
    for (const title of ['Settle time (p50, p95, p99)', 'Send time (p50, p95)']) {
      const qs = await Promise.all(queries.get(title)!.map(async (e) => valueOf(await query(e))));
      expect(
        qs.every((q) => Number.isFinite(q) && q > 0),
        `${title}: ${qs.join(', ')}`,
      ).toBe(true);
      expect([...qs].sort((a, b) => a - b)).toEqual(qs);
    }
  }, 120_000);
});
