/* The charts' units: a value formatted with its unit, '–' for none. */
import { num, rate } from './format.js';

export function fmtPerSec(n: number): string {
  return Number.isNaN(n) ? '–' : `${rate(n)}/s`;
}

export function fmtEntries(n: number): string {
  if (Number.isNaN(n)) return '–';
  return n >= 10_000 ? `${num(n / 1000)}k` : Number.isInteger(n) ? num(n) : n.toFixed(1);
}
