import type { RateStateCommands } from '../redis/tools/rate-state-commands.js';
import type { RateLimitState } from '../redis/tools/rate-state-replies.js';

/** A stream's rate limit for a group, as its page shows it: the pattern's name it is kept under, and its state. */
export interface RateLimitView {
  stream: string;
  group: string;
  /** keyPrefix + pattern: a partition's or a priority level's limit is its pattern's. */
  name: string;
  state: RateLimitState;
}

/**
 * The names (keyPrefix + pattern) whose limit `stream` could be under: itself (a plain pattern), its pattern's
 * for a partition (`app:{orders:3}` → `app:orders`), its base's for a priority level (`orders:prio:2` → `orders`).
 * Only a name whose workers published a limit answers, so a user's stream shaped like one finds nothing wrong.
 */
export function rateLimitNamesOf(stream: string): string[] {
  const names = [stream];
  const partition = /^(.*)\{(.*):(\d+)\}$/s.exec(stream);
  if (partition) names.push(`${partition[1]}${partition[2]}`);
  const base = /^(.*)[:/]prio:[1-9]$/s.exec(stream)?.[1];
  if (base !== undefined) {
    names.push(base);
    const tagged = /^\{([^{}]*)\}$/s.exec(base)?.[1];
    if (tagged !== undefined) names.push(tagged);
  }
  return [...new Set(names)];
}

/** `stream`'s rate limit for `group` (the first of its names with one); null when no worker publishes one. */
export async function rateLimitView(commands: RateStateCommands, stream: string, group: string): Promise<RateLimitView | null> {
  for (const name of rateLimitNamesOf(stream)) {
    const state = await commands.state(name, group);
    if (state) return { stream, group, name, state };
  }
  return null;
}
