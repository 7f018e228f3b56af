/**
 * Control characters a terminal or a log viewer would act on (C0, DEL, C1), line and paragraph
 * separators, and the bidirectional overrides that reorder what is shown ("Trojan source").
 */
// eslint-disable-next-line no-control-regex -- matching control characters is this file's job
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const visible = (c: string): string => {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/**
 * Text written by someone else (entry content, key and consumer names, handler errors) made safe
 * to print on one line: every control character shown as a visible `\xNN` / `\uNNNN` escape, so
 * a forged value can neither drive the operator's terminal (ESC sequences, BEL) nor forge a line.
 */
export function escapeControl(text: string): string {
  return text.replace(CONTROL, visible);
}

/**
 * `JSON.stringify` for terminals and logs: it escapes C0 characters itself, but leaves DEL, C1,
 * U+2028/2029 and the bidi overrides raw; those can only stand inside JSON strings, where a
 * `\uNNNN` escape means the same character, so the line stays valid JSON of the same value.
 */
export function safeJson(value: unknown): string {
  return JSON.stringify(value).replace(CONTROL, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A value quoted for a log line or a dead-letter reason, at most ~200 characters of it (safeJson's escapes). */
export function quotedPreview(value: string): string {
  const quoted = safeJson(value.length > 200 ? value.slice(0, 200) : value);
  return value.length > 200 ? `${quoted}… (${value.length} characters)` : quoted;
}
