import type { RedisConnection } from '../connection/connect.js';
import { pauseKeyOf } from '../../key-names.js';
import { parsePauseValue, type PauseState } from '../replies/replies.js';

/**
 * Pausing and resuming streams for a whole group (ops: CLI, dashboard, the hosts' pause()); workers
 * only ask EXISTS. Each stream key has its own flag (`<stream>:paused:<group>`, key-names.ts): a
 * partitioned pattern is paused partition by partition, so that a flag pauses exactly the stream it
 * names, whatever another stream's name looks like.
 */
export class PauseCommands {
  constructor(private readonly redis: RedisConnection) {}

  /** Pauses `stream` for `group` (kept as it was if paused already: the first pause's time and author stay). True if it was running. */
  async pause(stream: string, group: string, by: string, now = Date.now()): Promise<boolean> {
    const set = await this.redis.set(pauseKeyOf(stream, group), JSON.stringify({ at: now, by }), 'NX');
    return set === 'OK';
  }

  /** Resumes `stream` for `group`; true if it was paused. */
  async resume(stream: string, group: string): Promise<boolean> {
    return (await this.redis.del(pauseKeyOf(stream, group))) === 1;
  }

  /** Who paused `stream` for `group`, and when; null while it runs. */
  async state(stream: string, group: string): Promise<PauseState | null> {
    return parsePauseValue(await this.redis.get(pauseKeyOf(stream, group)));
  }

  /** Whether each stream is paused for `group` (EXISTS: the minimal consumer ACL has it). */
  async paused(streams: readonly string[], group: string): Promise<boolean[]> {
    return Promise.all(streams.map(async (stream) => (await this.redis.exists(pauseKeyOf(stream, group))) === 1));
  }
}
