import type { RateLimit } from '../../options/rate-limit-options.js';
import type { RateLimitCommands } from '../../redis/intake/rate-limit-commands.js';
import type { PauseWatch } from './pause-watch.js';
import type { StopSignal } from '../stop-signal.js';
import { ClaimGate } from './claim-gate.js';
import { PauseGate } from './pause-gate.js';
import { ReadSizeGate } from './read-size-gate.js';
import { PriorityGate } from './priority-gate.js';
import { RateGate } from './rate-gate.js';
import { RateLimiter } from './rate-limiter.js';
import type { ReadGate } from './read-gate.js';

/** A reader's intake as the plan names it: the read gates beyond the operator's pause, which every reader has. */
export interface IntakePlan {
  /** A rate-limited pattern's stream (one per reader): its reads take grants of the group's limit first. */
  rateLimit?: { name: string; limit: RateLimit } | undefined;
  /** A pattern with priorities: its reader's streams, one per level, the highest first (see PriorityGate). */
  priorities?: { highestFirst: readonly string[]; lowerEvery: number } | undefined;
}

/**
 * The read gates of a reader, in order: the pause first (a paused stream takes no grant), then the
 * plan's, and the read's CLAIM innermost (where the server offers it, every read may claim).
 */
export function readGatesOf(
  plan: IntakePlan,
  parts: {
    pause: Pick<PauseWatch, 'readable' | 'changed$'>;
    commands: { rateLimits: RateLimitCommands };
    stop: StopSignal;
    /** The settle policy's COUNT for a park (fair groups'), when it has one. */
    readSize?: ((asked: number) => number) | undefined;
  } & ConstructorParameters<typeof ClaimGate>[0],
): ReadGate[] {
  const gates: ReadGate[] = [new PauseGate(parts.pause)];
  if (parts.readSize) gates.push(new ReadSizeGate(parts.readSize));
  const { rateLimit } = plan;
  if (rateLimit)
    gates.push(
      new RateGate(new RateLimiter({ limits: parts.commands.rateLimits, name: rateLimit.name, limit: rateLimit.limit, stop: parts.stop })),
    );
  if (plan.priorities) gates.push(new PriorityGate(plan.priorities));
  gates.push(new ClaimGate(parts));
  return gates;
}
