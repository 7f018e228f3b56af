/* What the charts and the summary add up, over the streams shown (the overview's page, or one stream). */
import type { GroupRow, StreamRow } from './api-replies.js';

export interface Figures {
  groups: GroupRow[];
  lag: number;
  pending: number;
  dead: number;
  produced: number | null;
  consumed: number | null;
}

export function figures(streams: StreamRow[]): Figures {
  const groups = streams.flatMap((s) => s.groups);
  const sum = <T>(xs: T[], of: (x: T) => number | null) => xs.reduce((n, x) => n + (of(x) ?? 0), 0);
  const known = <T>(xs: T[], of: (x: T) => number | null) => (xs.some((x) => of(x) !== null) ? sum(xs, of) : null);
  return {
    groups,
    lag: sum(groups, (g) => g.lag),
    pending: sum(groups, (g) => g.pending),
    dead: sum(streams, (s) => sum(s.deadLetters, (d) => d.length)),
    produced: known(streams, (s) => s.producedPerSec),
    consumed: known(groups, (g) => g.consumedPerSec),
  };
}
