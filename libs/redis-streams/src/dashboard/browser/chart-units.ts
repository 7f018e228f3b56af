/* The charts' units: a value formatted with its unit ('–' for none), and the y axis' gridlines. */
import { num, rate } from './format.js';

/** A chart's unit: how a value reads (legend, pointer), how a gridline reads, and whether only whole values make sense. */
export interface Unit {
  fmt(n: number): string;
  /** A gridline's value, exact at `step` (the gap between gridlines): at most as many decimals as the step has. */
  tick(n: number, step: number): string;
  /** Counts: no gridline between two whole numbers. */
  whole: boolean;
}

/** Decimals a step of 1, 2 or 5 × 10ⁿ needs to be written exactly. */
const decimalsOf = (step: number) => Math.max(0, Math.ceil(-Math.log10(step) - 1e-9));
const fixed = (n: number, step: number) => {
  const d = decimalsOf(step);
  return n.toLocaleString('en-US', { maximumFractionDigits: d });
};

export function fmtPerSec(n: number): string {
  return Number.isNaN(n) ? '–' : `${rate(n)}/s`;
}

export function fmtEntries(n: number): string {
  if (Number.isNaN(n)) return '–';
  return n >= 10_000 ? `${num(n / 1000)}k` : Number.isInteger(n) ? num(n) : n.toFixed(1);
}

export const PER_SEC: Unit = { fmt: fmtPerSec, tick: (n, step) => `${fixed(n, step)}/s`, whole: false };

// From 10,000 the steps are 5,000 or more (a peak over 4 × 2,500): every gridline is whole thousands.
export const ENTRIES: Unit = { fmt: fmtEntries, tick: (n, step) => (n >= 10_000 ? `${num(n / 1000)}k` : fixed(n, step)), whole: true };

/** The smallest 1, 2 or 5 × 10ⁿ at or above `n`. */
function niceCeil(n: number): number {
  const p = Math.pow(10, Math.floor(Math.log10(n)));
  return [1, 2, 5, 10].map((m) => m * p).find((v) => v >= n * (1 - 1e-9))!;
}

/**
 * The y axis' gridlines for values up to `peak`, bottom first; the last is the axis' top. At most four
 * gaps of one nice step (1, 2 or 5 × 10ⁿ), so that every label is distinct and exactly its line's value
 * (halving a top of 0.5 gave a 0.25 line written "0.3").
 */
export function axisTicks(peak: number, unit: Unit): { value: number; label: string }[] {
  if (!(peak > 0)) return [0, 1].map((value) => ({ value, label: unit.tick(value, 1) }));
  const step = Math.max(niceCeil(peak / 4), unit.whole ? 1 : 0);
  const gaps = Math.max(1, Math.ceil(peak / step - 1e-9));
  return Array.from({ length: gaps + 1 }, (_, i) => {
    // i × step rounded at the step's decimals: 3 × 0.1 is 0.30000000000000004.
    const value = Number((i * step).toFixed(decimalsOf(step)));
    return { value, label: unit.tick(value, step) };
  });
}
