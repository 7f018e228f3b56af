import type { RateLimitCommands } from '../../redis/intake/rate-limit-commands.js';
import type { Admission } from '../settle/admission.js';

/**
 * A pattern's own limit (`rateLimit` without `perKey`) at the start of an entry: nothing to check
 * (its grants are taken before its reads, see RateLimiter); a handler's RateLimitedException slows
 * the whole pattern in every worker of the group.
 */
export class PatternThrottle implements Admission {
  constructor(
    private readonly d: {
      pattern: string;
      /** Its limit's name in Redis (keyPrefix + pattern). */
      name: string;
      limits: Pick<RateLimitCommands, 'block'>;
      consumer: string;
    },
  ) {}

  pass(): undefined {
    return undefined;
  }

  slow(_entry: unknown, ms: number): { what: string; slowed: Promise<void> } {
    return { what: `"${this.d.pattern}"`, slowed: this.d.limits.block(this.d.name, ms, this.d.consumer) };
  }
}
