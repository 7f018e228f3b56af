// The retry section's markdown (bench/results/retries.md and a part of latest.md) and its completeness checks.
import { median, percentile, type RetrySection } from './retries.js';

export const RETRIES_HEADING = 'Retries: a failing downstream, on time, no head-of-line blocking';

const n = (v: number | undefined, digits = 0) =>
  v === undefined || Number.isNaN(v) ? '—' : v.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
const line = (cells: (string | number)[]) => `| ${cells.join(' | ')} |`;

/** Bytes of heap each waiting entry costs the consumer, per waiting run (after − before, over the entries waiting). */
export const bytesPerWaiting = (s: RetrySection): number[] => s.hol.waiting.map((r) => (r.heapAfter - r.heapBefore) / s.sizes.waiting);

export function retriesMarkdown(s: RetrySection, smokeNote: string): string {
  return [
    `## ${RETRIES_HEADING}`,
    ...(s.smoke ? ['', `> **${smokeNote}**`] : []),
    '',
    ...downstreamLines(s),
    '',
    ...onTimeLines(s),
    '',
    ...holLines(s),
  ].join('\n');
}

function downstreamLines(s: RetrySection): string[] {
  const { downstream: size, downstreamRounds: rounds, downstreamMinIdleMs: minIdle } = s.sizes;
  const figures = s.downstream.map((v) => ({
    ...v,
    ms: median(v.runs.map((r) => r.ms)),
    msgsPerSec: median(v.runs.map((r) => r.msgsPerSec)),
  }));
  const reference = figures.find((f) => f.variant === 'no failure')!;
  return [
    `A failing downstream: ${n(size)} preloaded entries, one consumer, batch 100, no-op handler; every 10th entry fails its first two deliveries and succeeds on its third. Every variant runs with minIdleMs ${n(minIdle)} (leaseRenewMs its default, a third of it): without a policy a failed entry comes back once idle minIdleMs − leaseRenewMs, at the next reclaim. From the first entry handled to the last acked; the variants take turns ${rounds} time${rounds === 1 ? '' : 's'} (the order rotates), medians shown, every run listed.`,
    '',
    '| failing downstream | time to all settled ms | msgs/s | × no failure (msgs/s) | runs ms (round order) |',
    '| --- | ---: | ---: | ---: | --- |',
    ...figures.map((f) =>
      line([
        f.variant,
        n(f.ms),
        n(f.msgsPerSec),
        `${(f.msgsPerSec / reference.msgsPerSec).toFixed(2)}×`,
        f.runs.map((r) => Math.round(r.ms)).join(', '),
      ]),
    ),
  ];
}

function onTimeLines(s: RetrySection): string[] {
  const { onTime: m, onTimeMaxDelayMs: max, onTimeSpacingMs: spacing } = s.sizes;
  const sorted = [...s.onTime.lateness].sort((a, b) => a - b);
  const q = (p: number) => n(percentile(sorted, p));
  return [
    `On time: ${m} entries written one every ${spacing} ms to an idle consumer, each failing once with RetryLaterException(its delay), the delays log-spaced from 50 ms to ${n(max)} ms in a shuffled order. Lateness of each retry on the server clock: the start of its retry delivery (Redis TIME minus the entry's XPENDING idle, read in the handler) minus its due time (its score in \`<stream>:retry:<group>\`, read once the failure was settled). Target: within max(50 ms, 5 % of the delay).`,
    '',
    '| on time (idle consumer) | retries | lateness p50 / p95 / p99 / max ms | within max(50 ms, 5 % of the delay) |',
    '| --- | ---: | ---: | ---: |',
    line([
      `delays 50 ms … ${n(max)} ms`,
      n(sorted.length),
      `${q(0.5)} / ${q(0.95)} / ${q(0.99)} / ${n(sorted.at(-1))}`,
      `${(s.onTime.within * 100).toFixed(1)} %`,
    ]),
  ];
}

function holLines(s: RetrySection): string[] {
  const { waiting, waitDelayMs, rate, seconds, holRounds: rounds, holMinIdleMs } = s.sizes;
  const p = (runs: RetrySection['hol']['waiting'], f: 'p50' | 'p99') => median(runs.map((r) => r[f]));
  const ratio = p(s.hol.waiting, 'p99') / p(s.hol.reference, 'p99');
  const bytes = median(bytesPerWaiting(s));
  const heap = (f: 'heapBefore' | 'heapAfter') => n(median(s.hol.waiting.map((r) => r[f])) / 2 ** 20, 1);
  const row = (what: string, runs: RetrySection['hol']['waiting'], x: string) =>
    line([
      what,
      n(p(runs, 'p50'), 1),
      n(p(runs, 'p99'), 1),
      x,
      runs.map((r) => r.p99).join(', '),
      runs.map((r) => `${r.delivered}/${r.sent}`).join(', '),
    ]);
  return [
    `No head-of-line blocking: new entries at ${n(rate)}/s for ${seconds} s (a burst every 10 ms, on a schedule), latency from their XADD to the handler (one machine, one clock), while ${n(waiting)} entries of the same stream wait for their retry (each failed once, retry in ${n(waitDelayMs)} ms: they wait through the whole run), against the same run with none waiting. minIdleMs ${n(holMinIdleMs)} in both: the waiting entries' idle is renewed several times during the run. The two take turns ${rounds} time${rounds === 1 ? '' : 's'}, medians shown.`,
    '',
    '| new entries | p50 ms | p99 ms | p99 × none waiting | runs p99 ms | handled / sent |',
    '| --- | ---: | ---: | ---: | --- | --- |',
    row(`${n(waiting)} waiting for their retry`, s.hol.waiting, `${ratio.toFixed(2)}×`),
    row('none waiting', s.hol.reference, '1.00×'),
    '',
    s.smoke
      ? 'Target (p99 within 2× of none waiting): not evaluated (smoke run).'
      : `Target: p99 within 2× of none waiting: ${ratio <= 2 ? 'met' : 'missed'} (${ratio.toFixed(2)}×).`,
    `Consumer heap (process.memoryUsage().heapUsed${s.hol.waiting.every((r) => r.gc) ? ', after a gc' : ', no gc available'}): ${heap('heapBefore')} MB idle, ${heap('heapAfter')} MB with ${n(waiting)} waiting: ${n(bytes)} bytes per waiting entry (median of ${s.hol.waiting.length} run${s.hol.waiting.length === 1 ? '' : 's'}).`,
  ];
}

/** What a completed section must hold: every run of every part, every entry handled, the waiting entries still waiting at the end. */
export function retriesProblems(s: RetrySection): string[] {
  const problems: string[] = [];
  const finite = (v: number) => Number.isFinite(v) && v > 0;
  for (const v of s.downstream) {
    if (v.runs.length !== s.sizes.downstreamRounds || !v.runs.every((r) => finite(r.msgsPerSec)))
      problems.push(`retries, failing downstream: ${v.variant} has ${v.runs.length} of ${s.sizes.downstreamRounds} runs`);
  }
  if (s.onTime.lateness.length !== s.sizes.onTime)
    problems.push(`retries, on time: ${s.onTime.lateness.length} of ${s.sizes.onTime} retries timed`);
  for (const [what, runs] of [
    ['waiting', s.hol.waiting],
    ['none waiting', s.hol.reference],
  ] as const) {
    if (runs.length !== s.sizes.holRounds) problems.push(`retries, head-of-line (${what}): ${runs.length} of ${s.sizes.holRounds} runs`);
    for (const r of runs) if (r.delivered !== r.sent) problems.push(`retries, head-of-line (${what}): handled ${r.delivered} of ${r.sent}`);
  }
  for (const r of s.hol.waiting)
    if (r.stillWaiting !== s.sizes.waiting)
      problems.push(`retries, head-of-line: ${r.stillWaiting} of ${s.sizes.waiting} entries still waiting at the end`);
  return problems;
}
