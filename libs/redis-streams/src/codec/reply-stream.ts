import { randomUUID } from 'node:crypto';

/**
 * The reply namespace: `<keyPrefix>replies:<uuid>`. A request's `replyTo` is untrusted input
 * (any producer with XADD rights on a request stream writes it), and a reply is an XADD with
 * trimming plus a PEXPIRE: the server writes replies only to keys of this exact shape, so a
 * request can never make it trim or expire a work stream.
 */
const NAMESPACE = 'replies:';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A new reply stream key for one client. */
export function newReplyStream(keyPrefix: string): string {
  return `${keyPrefix}${NAMESPACE}${randomUUID()}`;
}

/** True only for `<keyPrefix>replies:<uuid>`, what {@link newReplyStream} makes. */
export function isReplyStream(keyPrefix: string, key: string): boolean {
  const head = keyPrefix + NAMESPACE;
  return key.length === head.length + 36 && key.startsWith(head) && UUID.test(key.slice(head.length));
}

/** How README and errors describe the namespace. */
export const replyStreamPattern = (keyPrefix: string): string => `${keyPrefix}${NAMESPACE}<uuid>`;
