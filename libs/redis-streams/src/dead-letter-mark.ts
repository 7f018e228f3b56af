import { brandMark } from './brand.js';

/** The brands of `DeadLetterException` (Nest) and `DeadLetterError` (core; see brand.ts), readable without loading Nest. */
const DEAD_LETTER = brandMark('DeadLetterException');
const DEAD_LETTER_ERROR = brandMark('DeadLetterError');

/**
 * True for a `DeadLetterException` or a `DeadLetterError` (of either build), and for the
 * exception's error object as it comes out of Nest's RPC exception filter (`{ deadLetter: true }`).
 */
export function isDeadLetter(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const marks = err as Record<symbol, unknown>;
  return marks[DEAD_LETTER] === true || marks[DEAD_LETTER_ERROR] === true || (err as { deadLetter?: unknown }).deadLetter === true;
}
