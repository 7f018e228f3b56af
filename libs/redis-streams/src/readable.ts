/**
 * Figures worded for people, the same in the CLI, the dashboard and the logs: a count with its noun in
 * the right number ("1 entry", "2 entries"), a duration in the unit that reads best ("751 ms", "12.5 min").
 */

/** `n` and its noun, singular for exactly one: counted(1, 'entry', 'entries') is "1 entry". */
export const counted = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** A duration in the largest unit that keeps it readable: ms below 1 s, then s, min, h, d (one decimal). */
export function duration(ms: number): string {
  const size = Math.abs(ms);
  if (size < 1000) return `${Math.round(ms)} ms`;
  if (size < 120_000) return `${(ms / 1000).toFixed(1)} s`;
  if (size < 7_200_000) return `${(ms / 60_000).toFixed(1)} min`;
  if (size < 172_800_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${(ms / 86_400_000).toFixed(1)} d`;
}
