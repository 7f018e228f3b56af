import { inspect } from 'node:util';
import { escapeControl } from './escape-control.js';
import { authSecrets, redactText } from './redact.js';

/** Longest description kept (dead letter, log line, span): a handler's message may quote a whole payload. */
export const MAX_DESCRIBED_CHARS = 8192;

/**
 * One readable line for any failure, safe to log: Nest hands handler errors over as
 * `{ status, message }` objects; passwords (the error's own AUTH arguments, any URL's) are
 * masked and control characters escaped (a handler's message may quote the entry); cut past
 * MAX_DESCRIBED_CHARS. `alsoSecretsOf`: another error whose passwords the text may quote.
 */
export function describeError(error: unknown, alsoSecretsOf?: unknown): string {
  return printable(rawMessage(error), authSecrets(alsoSecretsOf, authSecrets(error)));
}

function rawMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'message' in error) return String((error as { message: unknown }).message);
  try {
    const json = JSON.stringify(error);
    if (json !== undefined) return json;
  } catch {
    // Circular, or a BigInt inside: inspect shows either.
  }
  if (typeof error !== 'object' || error === null) return String(error);
  return inspect(error, { depth: 2, breakLength: Infinity, maxArrayLength: 20, maxStringLength: MAX_DESCRIBED_CHARS });
}

/**
 * Masked, escaped, cut past MAX_DESCRIBED_CHARS saying how much was left out. Only a bounded
 * head is masked (the masks' regexes on 20 MB would cost): the kept part comes from it.
 */
function printable(raw: string, secrets: Iterable<string>): string {
  const head = raw.length > 2 * MAX_DESCRIBED_CHARS ? raw.slice(0, 2 * MAX_DESCRIBED_CHARS) : raw;
  return capped(redactText(head, secrets), raw.length - head.length);
}

/** `text` cut past MAX_DESCRIBED_CHARS; `cut`: characters already left out before it. */
function capped(text: string, cut = 0): string {
  const more = text.length - MAX_DESCRIBED_CHARS + cut;
  return more > 0 ? `${text.slice(0, MAX_DESCRIBED_CHARS)}… (${more} more characters)` : text;
}

/** An RpcException stands for its error (what Nest's filter passes on). */
function wrappedOf(error: unknown): unknown {
  const getError = (error as { getError?: unknown } | null | undefined)?.getError;
  return typeof getError === 'function' ? (getError as () => unknown).call(error) : error;
}

/** The passwords of the error's commands, and of those of the error an RpcException wraps. */
function secretsOf(error: unknown): Set<string> {
  const secrets = authSecrets(error);
  const inner = wrappedOf(error);
  return inner === error ? secrets : authSecrets(inner, secrets);
}

/** A handler's failure without its class, masked, escaped and bounded: a span's exception message. */
export function handlerMessage(error: unknown): string {
  const inner = wrappedOf(error);
  return printable(typeof inner === 'string' ? inner : rawMessage(inner), secretsOf(error));
}

/**
 * A handler's failure as `Class: message`, the first line of a Node stack, for dead letters and
 * logs: `CardDeclined: card 4242 declined`, `RpcException: …` (its error), `string: …` for a
 * thrown string, `Object: {…}` for a plain object. Masked, escaped and bounded as describeError.
 */
export function describeHandlerError(error: unknown): string {
  if (error === null || error === undefined) return String(error);
  const kind = typeof error === 'object' ? classOf(error) : typeof error;
  const inner = wrappedOf(error);
  const message = typeof inner === 'string' ? inner : rawMessage(inner);
  return printable(message === '' ? kind : `${kind}: ${message}`, secretsOf(error));
}

/**
 * The stack to log beside a handler's failure: its `Class: message` line and its frames (masked,
 * escaped, bounded); undefined when it has none (a thrown string).
 */
export function handlerStack(error: unknown): string | undefined {
  const stack = typeof error === 'object' && error !== null ? (error as { stack?: unknown }).stack : undefined;
  if (typeof stack !== 'string') return undefined;
  const secrets = secretsOf(error);
  const after = afterHeader(stack, (error as { message?: unknown }).message);
  const lines = after
    ? after.filter((line) => /^\s+at /.test(line)).map((frame) => redactText(frame, secrets))
    : // V8 formatted it with an earlier message: its header cannot be told from frames, so no line passes for one.
      [
        '    (stack formatted before the message changed, as it was:)',
        ...stack.split('\n').map((line) => `    | ${redactText(line, secrets)}`),
      ];
  if (lines.length === 0) return undefined;
  return `${describeHandlerError(error)}\n${capped(lines.join('\n'))}`;
}

/**
 * The stack's lines after the header V8 wrote (`name: message`), found by the message rather than
 * by the lines' shape: a message's own lines may look like frames, and a name set after the
 * stack was formatted is not in it. Undefined when the message is not in it (changed since).
 */
function afterHeader(stack: string, message: unknown): string[] | undefined {
  const text = typeof message === 'string' ? message : '';
  const at = text === '' ? 0 : stack.indexOf(text);
  if (at < 0) return undefined;
  return stack
    .slice(at + text.length)
    .split('\n')
    .slice(1);
}

/** An error's class as a dead letter and `error.type` name it: its `name`, or its constructor's when that says only "Error". */
export function classOf(error: object): string {
  const name = error instanceof Error ? error.name : undefined;
  // A subclass that does not set `name` still says "Error" there: its constructor names it.
  if (name && name !== 'Error') return name;
  const ctor = (error as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof ctor === 'string' && ctor !== '' ? ctor : (name ?? 'Object');
}

/** classOf made printable and short, for a span or metric attribute. */
export function printableClassOf(error: object): string {
  const name = escapeControl(classOf(error));
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}
