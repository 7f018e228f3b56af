/* What the page keeps of each chart's figures as it refreshes (at most an hour of them, in the tab),
 * starting from the server's kept past (figure-history.ts) when it has one. */
import { state, type Series } from './state.js';

/** Points kept per chart: an hour at one refresh a second. */
const KEEP = 3600;

/** One line of a chart: its name, its colour (a CSS variable) and this refresh's value (null: unknown). */
export interface Line {
  name: string;
  color: string;
  value: number | null | undefined;
  /** Values of the refreshes before this one, oldest first (a rate's history from the server), to start from. */
  before?: number[];
  /** The server's kept past of this line, at `pastAt`'s times: what the chart starts from when the tab opens. */
  past?: (number | null)[];
}

/** Adds this refresh's values to the chart's series (once per refresh: a second render within 0.5 s adds nothing). */
export function record(key: string, lines: Line[], now: number, pastAt?: number[]): Series {
  let s = state.series.get(key);
  if (!s && pastAt && pastAt.length > 0) {
    // The server's past, at its own times (one point an interval): the chart opens with the last hour.
    const keep = pastAt.findIndex((t) => t < now - 500 && now - t <= KEEP * 1000);
    const from = keep < 0 ? pastAt.length : keep;
    const upTo = pastAt.findLastIndex((t) => t < now - 500) + 1;
    s = { at: pastAt.slice(from, upTo), lines: {} };
    for (const l of lines) s.lines[l.name] = (l.past ?? new Array<null>(pastAt.length).fill(null)).slice(from, upTo);
    state.series.set(key, s);
  }
  if (!s) {
    s = { at: [], lines: {} };
    // A rate's past, as the server kept it (about a second apart): the chart starts with minutes, not a dot.
    const seed = Math.max(0, ...lines.map((l) => l.before?.length ?? 0));
    for (let i = 0; i < seed; i++) s.at.push(now - (seed - i) * 1000);
    for (const l of lines) {
      const b = l.before ?? [];
      s.lines[l.name] = [...new Array<null>(seed - b.length).fill(null), ...b];
    }
    state.series.set(key, s);
  }
  if (s.at.length > 0 && now - s.at[s.at.length - 1]! < 500) return s;
  s.at.push(now);
  for (const l of lines) {
    const values = (s.lines[l.name] ??= new Array<null>(s.at.length - 1).fill(null));
    values.push(typeof l.value === 'number' && Number.isFinite(l.value) ? l.value : null);
    if (values.length > KEEP) values.splice(0, values.length - KEEP);
  }
  if (s.at.length > KEEP) s.at.splice(0, s.at.length - KEEP);
  return s;
}
