import { escapeControl } from '../escape-control.js';
import { fieldsToRecord } from './entry-codec.js';

/** The most of a handler's stack a letter keeps (its first frames: where it failed). */
export const LETTER_STACK_CHARS = 4_000;

/** A dead-lettered entry: where it came from, what it held and why it was given up on. */
export interface DeadLetter {
  /** Id in the dead-letter stream. */
  id?: string;
  /** Source stream key and the entry's id there. */
  stream: string;
  sourceId: string;
  group: string;
  consumer: string;
  deliveryCount: number;
  /** Why: the last handler error, or the decoding / size / delivery-limit reason. */
  error: string;
  /** The handler's error and stack frames (redacted, control characters escaped, at most LETTER_STACK_CHARS), when a handler failed. */
  stack?: string;
  /** The entry's field/value pairs, in their original order. */
  fields: string[];
  /** When it was dead-lettered (ms since epoch). */
  deadAt: number;
}

/**
 * Dead-letter entry fields but `fields`, which holds the original pairs as a JSON array (order
 * and names survive) and which the dead-letter script adds, copied byte for byte inside Redis
 * (stream-commands.ts): a value that is not UTF-8 never passes through a JavaScript string.
 */
export function encodeDeadLetterHead(d: Omit<DeadLetter, 'fields'>): string[] {
  return [
    'stream',
    d.stream,
    'sourceId',
    d.sourceId,
    'group',
    d.group,
    'consumer',
    d.consumer,
    'deliveryCount',
    String(d.deliveryCount),
    'error',
    d.error,
    'deadAt',
    String(d.deadAt),
    ...(d.stack ? ['stack', letterStack(d.stack)] : []),
  ];
}

/** The most of the stack's first line (the error's message, whole in `error`) a letter keeps: the frames matter more. */
const STACK_HEAD_CHARS = 500;

/**
 * A stack as a letter keeps it: one line per frame, each line's control characters escaped (a forged
 * message cannot drive a terminal that prints it), its first line cut at STACK_HEAD_CHARS and the
 * whole at LETTER_STACK_CHARS on a frame's end.
 */
export function letterStack(stack: string): string {
  const [head = '', ...frames] = stack.split('\n').map(escapeControl);
  const chars = [...head];
  let kept = chars.length > STACK_HEAD_CHARS ? `${chars.slice(0, STACK_HEAD_CHARS).join('')}…` : head;
  for (const frame of frames) {
    if (kept.length + 1 + frame.length > LETTER_STACK_CHARS) return `${kept}\n    … (cut at ${LETTER_STACK_CHARS} characters)`;
    kept += `\n${frame}`;
  }
  return kept;
}

export function decodeDeadLetter(id: string, raw: readonly string[] | null): DeadLetter {
  const f = fieldsToRecord(raw ?? []);
  let fields: unknown;
  try {
    fields = JSON.parse(f.fields ?? '[]');
  } catch {
    fields = [];
  }
  return {
    id,
    stream: f.stream ?? '',
    sourceId: f.sourceId ?? '',
    group: f.group ?? '',
    consumer: f.consumer ?? '',
    deliveryCount: Number(f.deliveryCount ?? 0),
    error: f.error ?? '',
    fields: Array.isArray(fields) ? fields.map(String) : [],
    deadAt: Number(f.deadAt ?? 0),
    ...(f.stack ? { stack: f.stack } : {}),
  };
}
