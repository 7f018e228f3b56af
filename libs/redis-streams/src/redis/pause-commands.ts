import type { RedisConnection } from './connect.js';
import { parsePauseValue, type PauseState } from './replies.js';

/**
 * The pause flag of a pattern for one group: `<name>:paused:<group>`, where `name` is the
 * pattern's logical stream (`keyPrefix + pattern`: `orders`, or `app:orders` for the partitions
 * `app:{orders:0}` …). Its value says who paused it and when; its existence is the pause.
 */
export function pauseKeyOf(name: string, group: string): string {
  return `${name}:paused:${group}`;
}

/** The logical stream a stream key belongs to: `app:{orders:3}` → `app:orders`; any other key is its own. */
export function pauseNameOf(stream: string): string {
  const m = /^(.*)\{(.+):\d+\}$/s.exec(stream);
  return m ? `${m[1]}${m[2]}` : stream;
}

/** Pausing and resuming a pattern for a whole group (ops: CLI, dashboard, the hosts' pause()); workers only ask EXISTS. */
export class PauseCommands {
  constructor(private readonly redis: RedisConnection) {}

  /**
   * Pauses `name` for `group` (kept as it was if paused already: the first pause's time and author stay). True if it
   * was running. `name` may be any stream key of the pattern: every call here goes through pauseNameOf, as the workers' do.
   */
  async pause(name: string, group: string, by: string, now = Date.now()): Promise<boolean> {
    const set = await this.redis.set(pauseKeyOf(pauseNameOf(name), group), JSON.stringify({ at: now, by }), 'NX');
    return set === 'OK';
  }

  /** Resumes `name` for `group`; true if it was paused. */
  async resume(name: string, group: string): Promise<boolean> {
    return (await this.redis.del(pauseKeyOf(pauseNameOf(name), group))) === 1;
  }

  /** Who paused `name` for `group`, and when; null while it runs. */
  async state(name: string, group: string): Promise<PauseState | null> {
    return parsePauseValue(await this.redis.get(pauseKeyOf(pauseNameOf(name), group)));
  }

  /** Whether each name is paused for `group` (EXISTS: the minimal consumer ACL has it). */
  async paused(names: readonly string[], group: string): Promise<boolean[]> {
    return Promise.all(names.map(async (name) => (await this.redis.exists(pauseKeyOf(pauseNameOf(name), group))) === 1));
  }
}
