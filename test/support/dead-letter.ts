import type { Redis } from 'ioredis';

type LetterFields = 'sourceId' | 'group' | 'consumer' | 'deliveryCount' | 'error' | 'deadAt' | 'fields';

/** A dead letter of `stream` written into `dead` as the dead-letterer writes one, any field given over the defaults, then `extra` pairs. */
export function forgeDeadLetter(
  client: Redis,
  dead: string,
  stream: string,
  fields: Partial<Record<LetterFields, string>> = {},
  extra: string[] = [],
): Promise<string> {
  const all = {
    stream,
    sourceId: '1-1',
    group: 'g',
    consumer: 'c',
    deliveryCount: '3',
    error: 'boom',
    deadAt: '1700000000000',
    fields: '["data","{}"]',
    ...fields,
  };
  return client.xadd(dead, '*', ...Object.entries(all).flat(), ...extra) as Promise<string>;
}
