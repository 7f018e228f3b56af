/* Figures and names in words: counts, rates, ages, and text from Redis made safe for a dialog. */

export function num(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : Math.round(n).toLocaleString('en-US');
}

/** `n` (thousands separated) and its noun, singular for exactly one (readable.ts' counted, in the page). */
export function count(n: number, one: string, many: string): string {
  return `${num(n)} ${n === 1 ? one : many}`;
}

export function rate(n: number | null | undefined): string {
  return n === null || n === undefined ? '–' : n < 10 ? n.toFixed(1) : num(n);
}

export function age(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || ms < 0) return '–';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 7200000) return `${(ms / 60000).toFixed(1)} min`;
  return ms < 172800000 ? `${(ms / 3600000).toFixed(1)} h` : `${(ms / 86400000).toFixed(1)} d`;
}

/** Ms since an entry id's time; null when the id is no time (before 2000, or in the future). */
export function idAge(value: string): number | null {
  const born = Number(value.split('-')[0]);
  const now = Date.now();
  return born >= 946684800000 && born <= now ? now - born : null;
}

/** A name from Redis for a dialog's text: control, line-breaking and bidi characters as escapes (a name cannot add lines to a question). */
export function named(text: string): string {
  return text.replace(
    // eslint-disable-next-line no-control-regex -- matching control characters is the point
    /[\u0000-\u001f\u007f-\u009f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** A size in bytes, in words: 1.2 MB, 340 KB, 12 bytes. */
export function size(bytes: number): string {
  if (bytes >= 1_000_000) return `${(bytes / 1_000_000).toFixed(1)} MB`;
  return bytes >= 10_000 ? `${Math.round(bytes / 1000)} KB` : `${num(bytes)} bytes`;
}
