/**
 * The connection names of a consumer, `<group>:<consumer>` (then `:command`, `:blocking`, …),
 * with both parts percent-encoded: Redis refuses CLIENT SETNAME outside '!'..'~' (a space, any
 * non-ASCII character) and ioredis ignores the refusal, which would leave a live worker's
 * connections unnamed, so unseen by the liveness check (connected-consumers.ts). Encoding ':' and
 * '%' too makes the name read one way only (group "a:b" + "c" is not group "a" + "b:c").
 * Plain names (the usual `orders-workers:worker-1`) stay as they are.
 */
export function consumerConnectionName(group: string, consumer: string): string {
  return `${encodeNamePart(group)}:${encodeNamePart(consumer)}`;
}

export function encodeNamePart(name: string): string {
  let out = '';
  for (const byte of Buffer.from(name, 'utf8')) {
    const plain = byte >= 0x21 && byte <= 0x7e && byte !== 0x25 && byte !== 0x3a;
    out += plain ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The name {@link encodeNamePart} encoded; undefined when `part` is not such an encoding. */
export function decodeNamePart(part: string): string | undefined {
  if (!/^(?:[!-$&-9;-~]|%[0-9A-F]{2})*$/.test(part)) return undefined;
  const bytes = part.replace(/%([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
  return Buffer.from(bytes, 'latin1').toString('utf8');
}
