import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { repoRoot } from './support/built.js';

// The alert rules of docs/monitoring/alerts.yml, unit-tested by Prometheus' own `promtool test rules` (Debian's
// `prometheus` package, which .ci/run installs) against test/monitoring/alerts.test.yml: what pages, what does not,
// and how many times with two replicas.

describe('the monitoring pack: alert rules', () => {
  it('promtool checks the rules and passes their tests (a throttled tenant pages nobody; two replicas page once)', async () => {
    const run = promisify(execFile);
    await run('promtool', ['check', 'rules', 'docs/monitoring/alerts.yml'], { cwd: repoRoot });
    const { stdout } = await run('promtool', ['test', 'rules', 'test/monitoring/alerts.test.yml'], { cwd: repoRoot }).catch(
      (err: { stdout?: string; stderr?: string }) => {
        throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );
    expect(stdout).toMatch(/SUCCESS/);
  });
});

/** The board's queries, as Grafana would send them for "all" streams and groups. */
function boardQueries(): { title: string; expr: string }[] {
  const board = JSON.parse(readFileSync(join(repoRoot, 'docs/monitoring/grafana-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  return board.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      title: p.title,
      expr: t.expr.replaceAll('$stream', '.*').replaceAll('$group', '.*').replaceAll('$__rate_interval', '5m'),
    })),
  );
}

describe('the monitoring pack: the Grafana board', () => {
  it("counts the group's figures once however many replicas export them (two replicas: Redis' 3 dead letters read 3, not 6)", async () => {
    const queries = boardQueries();
    const at = (title: string) => queries.find((q) => q.title === title)!.expr;
    // Two replicas of one worker: each exports the group's gauges as Redis holds them (lag 336, pending 1, 3 dead letters).
    const series = ['w1', 'w2'].flatMap((instance) => [
      `messaging_redis_streams_lag{messaging_destination_name="app:billing", messaging_consumer_group_name="g", instance="${instance}"}`,
      `messaging_redis_streams_pending{messaging_destination_name="app:billing", messaging_consumer_group_name="g", instance="${instance}"}`,
      `messaging_redis_streams_dead_letters{messaging_destination_name="app:billing", messaging_consumer_group_name="g", instance="${instance}"}`,
    ]);
    const values = ['336x10', '1x10', '3x10'];
    const tests = {
      rule_files: [],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: series.map((s, i) => ({ series: s, values: values[i % 3] })),
          promql_expr_test: [
            { expr: at('Lag (all streams)'), eval_time: '5m', exp_samples: [{ labels: '{}', value: 336 }] },
            { expr: at('Pending'), eval_time: '5m', exp_samples: [{ labels: '{}', value: 1 }] },
            { expr: at('Dead letters'), eval_time: '5m', exp_samples: [{ labels: '{}', value: 3 }] },
            {
              expr: at('Lag per stream'),
              eval_time: '5m',
              exp_samples: [{ labels: '{messaging_destination_name="app:billing"}', value: 336 }],
            },
            {
              expr: at('Pending per stream'),
              eval_time: '5m',
              exp_samples: [{ labels: '{messaging_destination_name="app:billing"}', value: 1 }],
            },
            {
              expr: at('Dead letters per stream'),
              eval_time: '5m',
              exp_samples: [{ labels: '{messaging_destination_name="app:billing"}', value: 3 }],
            },
          ],
        },
      ],
    };
    const dir = mkdtempSync(join(tmpdir(), 'board-'));
    try {
      const file = join(dir, 'board.test.yml');
      // JSON is YAML: promtool reads it as its test file.
      writeFileSync(file, JSON.stringify(tests));
      const { stdout } = await promisify(execFile)('promtool', ['test', 'rules', file]).catch(
        (err: { stdout?: string; stderr?: string }) => {
          throw new Error(`promtool test rules failed:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
        },
      );
      expect(stdout).toMatch(/SUCCESS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
