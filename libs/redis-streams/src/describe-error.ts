import { authSecrets, redactText } from './redact.js';

/**
 * One readable line for any failure, safe to log: Nest hands handler errors over as
 * `{ status, message }` objects; passwords (the error's own AUTH arguments, any URL's) are
 * masked and control characters escaped (a handler's message may quote the entry).
 */
export function describeError(error: unknown): string {
  return redactText(rawMessage(error), authSecrets(error));
}

function rawMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'message' in error) return String((error as { message: unknown }).message);
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/**
 * A handler's failure as `Class: message`, the first line of a Node stack, for dead letters and
 * logs: `CardDeclined: card 4242 declined`, `RpcException: …` (its error), `string: …` for a
 * thrown string, `Object: {…}` for a plain object. Masked and escaped as describeError.
 */
export function describeHandlerError(error: unknown): string {
  if (error === null || error === undefined) return String(error);
  const kind = typeof error === 'object' ? classOf(error) : typeof error;
  const inner = typeof (error as { getError?: unknown }).getError === 'function' ? (error as { getError(): unknown }).getError() : error;
  const message = typeof inner === 'string' ? inner : rawMessage(inner);
  return redactText(message === '' ? kind : `${kind}: ${message}`, authSecrets(error));
}

/**
 * The stack to log beside a handler's failure: its `Class: message` line (escaped: the message
 * may quote the entry) and its frames; undefined when it has none (a thrown string).
 */
export function handlerStack(error: unknown): string | undefined {
  const stack = typeof error === 'object' && error !== null ? (error as { stack?: unknown }).stack : undefined;
  if (typeof stack !== 'string') return undefined;
  // Frames only, after the header V8 wrote: a message's own lines cannot pass for frames.
  const { name, message } = error as { name?: unknown; message?: unknown };
  const head = `${String(name)}${typeof message === 'string' && message !== '' ? `: ${message}` : ''}`;
  const frames = (stack.startsWith(head) ? stack.slice(head.length) : stack).split('\n').filter((line) => /^\s+at /.test(line));
  if (frames.length === 0) return undefined;
  const secrets = authSecrets(error);
  return [describeHandlerError(error), ...frames.map((frame) => redactText(frame, secrets))].join('\n');
}

function classOf(error: object): string {
  const name = error instanceof Error ? error.name : undefined;
  // A subclass that does not set `name` still says "Error" there: its constructor names it.
  if (name && name !== 'Error') return name;
  const ctor = (error as { constructor?: { name?: unknown } }).constructor?.name;
  return typeof ctor === 'string' && ctor !== '' ? ctor : (name ?? 'Object');
}
