import { brandMark } from './brand.js';

/** The brand of `BatchFailure` (see brand.ts), readable without loading Nest. */
const BATCH_FAILURE = brandMark('BatchFailure');

/** One entry a batch handler said failed, as the transport reads it back: by its context, which is this delivery's own. */
export interface EntryFailure {
  context: object;
  error: unknown;
}

/**
 * The entries a `BatchFailure` (Nest) or a `BatchFailureError` (core: the list is its own
 * `batchFailures`) names, by context, also as a BatchFailure comes out of Nest's RPC exception
 * filter (its error object, handed on as is); undefined for anything else.
 */
export function batchFailures(err: unknown): Map<unknown, unknown> | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const marked = (err as Record<symbol, unknown>)[BATCH_FAILURE] === true;
  const error = marked ? (err as { getError(): unknown }).getError() : err;
  const list = typeof error === 'object' && error !== null ? (error as { batchFailures?: unknown }).batchFailures : undefined;
  if (!Array.isArray(list)) return undefined;
  // A later listing of the same entry wins.
  return new Map((list as Partial<EntryFailure>[]).map((f) => [f?.context, f?.error]));
}

/**
 * What a batch handler's call came to, whichever host called it: undefined when it failed no entry,
 * else the failed entries by index in `contexts`. A BatchFailure, thrown or returned, fails the
 * entries it names; anything else thrown fails the whole call (rejects); a BatchFailure that names
 * no entry of this call (an earlier call's, thrown again; an error a filter reshaped) fails them all.
 */
export async function batchOutcome(contexts: readonly object[], call: () => Promise<unknown>): Promise<Map<number, unknown> | undefined> {
  let failed: Map<unknown, unknown> | undefined;
  let thrown: unknown;
  try {
    thrown = await call();
    failed = batchFailures(thrown);
  } catch (error) {
    failed = batchFailures(error);
    if (!failed) throw error;
    thrown = error;
  }
  if (!failed) return undefined;
  const byIndex = new Map<number, unknown>();
  contexts.forEach((context, i) => failed.has(context) && byIndex.set(i, failed.get(context)));
  if (byIndex.size === 0) throw thrown;
  return byIndex;
}
