import { ReplyShapeError } from '../replies/reply-shape-error.js';

/** A key a per-key limit holds back: its name as its keyrate keys have it (escaped, or `%#<hash>` when long), and for how long. */
export interface HeldKey {
  /** The key as its keyrate keys name it (`%3A` for `:` …; `%#<sha-256>` for a long one). */
  key: string;
  /** Ms until a grant may be taken for it (Redis' clock). */
  forMs: number;
}

/** A pattern's rate limit for one group, as its workers published it and as its keys stand now (RATE_STATE_SCRIPT). */
export interface RateLimitState {
  max: number;
  perMs: number;
  /** Per key: `max` of each key per `perMs` (the window and block below are then unused; the held keys tell). */
  perKey: boolean;
  /** Ms until the record expires unless a worker writes it again (-1: no expiry, written by hand). */
  recordTtlMs: number;
  /** Grants in the current window (the last `perMs` ms). */
  windowUsed: number;
  /** Ms the pattern stays blocked (a handler's RateLimitedException); 0 when not. */
  blockedForMs: number;
  /** Who set the block (a consumer's name); null when not blocked. */
  blockedBy: string | null;
  /** Keys held back now, held longest first, at most the asked count and bytes. */
  held: HeldKey[];
  /** How many keys are held back now (the held set keeps the 1,000 held longest). */
  heldCount: number;
  /** Redis' clock when read (ms). */
  now: number;
}

const str = (v: unknown): string => (Buffer.isBuffer(v) ? v.toString('utf8') : String(v));

/** RATE_STATE_SCRIPT's reply; null for `{}` (no worker publishes a limit of this pattern for this group). */
export function parseRateLimitState(reply: unknown): RateLimitState | null {
  if (!Array.isArray(reply)) throw new ReplyShapeError('rate limit state', reply);
  if (reply.length === 0) return null;
  if (reply.length < 10 || !Array.isArray(reply[7])) throw new ReplyShapeError('rate limit state', reply);
  const held = reply[7] as unknown[];
  const blockedForMs = Number(reply[5]);
  return {
    max: Number(reply[0]),
    perMs: Number(reply[1]),
    perKey: Number(reply[2]) === 1,
    recordTtlMs: Number(reply[3]),
    windowUsed: Number(reply[4]),
    blockedForMs,
    blockedBy: blockedForMs > 0 && reply[6] !== null && reply[6] !== false ? str(reply[6]) : null,
    held: Array.from({ length: Math.floor(held.length / 2) }, (_, i) => ({ key: str(held[2 * i]), forMs: Number(held[2 * i + 1]) })),
    heldCount: Number(reply[8]),
    now: Number(reply[9]),
  };
}
