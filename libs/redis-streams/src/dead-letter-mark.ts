import { brandMark } from './brand.js';

/** The brand of `DeadLetterException` (see brand.ts), readable without loading Nest. */
const DEAD_LETTER = brandMark('DeadLetterException');

/**
 * True for a `DeadLetterException` (of either build), and for its error object as it comes out
 * of Nest's RPC exception filter (`{ deadLetter: true }`).
 */
export function isDeadLetter(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  return (err as Record<symbol, unknown>)[DEAD_LETTER] === true || (err as { deadLetter?: unknown }).deadLetter === true;
}
