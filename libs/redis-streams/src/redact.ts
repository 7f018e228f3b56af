/**
 * Credentials out of everything the library prints or hands over: ioredis errors carry the
 * command that failed, and the handshake's is `HELLO 3 AUTH <user> <password>` (or `AUTH …`),
 * which util.inspect prints (an unhandled rejection, a logger given the error).
 */
import { brand } from './brand.js';
import { escapeControl } from './escape-control.js';

/** What stands for a password. */
export const PASSWORD_MASK = '***';

/**
 * Every `user:password@` in a text with the password masked, even in a URL that does not parse or
 * is mistyped (`redis:/user:pw@…`, `redis//user:pw@…`, `redis:user:pw@…`).
 */
export function maskUrl(text: string): string {
  // (?!\/): `redis:` followed by `//` is the scheme, not a user.
  return text.replace(/(^|[\s"'(/:=])([^\s:/@"']*:)(?!\/)[^\s@"']*@/g, `$1$2${PASSWORD_MASK}@`);
}

/** The passwords an error's commands carry (AUTH's last argument, HELLO's after AUTH <user>), through causes and nested errors. */
export function authSecrets(err: unknown, into: Set<string> = new Set(), depth = 0): Set<string> {
  if (typeof err !== 'object' || err === null || depth > 5) return into;
  const command = (err as { command?: { name?: unknown; args?: unknown } }).command;
  const args = Array.isArray(command?.args) ? command.args.map(String) : [];
  const name = String(command?.name ?? '').toLowerCase();
  if (name === 'auth' && args.length > 0) into.add(args[args.length - 1]!);
  const auth = args.findIndex((a) => a.toUpperCase() === 'AUTH');
  if (name === 'hello' && auth >= 0 && args[auth + 2] !== undefined) into.add(args[auth + 2]!);
  for (const nested of [
    (err as { cause?: unknown }).cause,
    (err as { lastNodeError?: unknown }).lastNodeError,
    ...((err as { previousErrors?: unknown[] }).previousErrors ?? []),
  ]) {
    authSecrets(nested, into, depth + 1);
  }
  return into;
}

/** An ioredis error, or one wrapping it: it carries a command's arguments (`command.args`) somewhere. */
export function carriesCommand(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 5) return false;
  if ('command' in err || 'previousErrors' in err) return true;
  return (
    carriesCommand((err as { cause?: unknown }).cause, depth + 1) ||
    carriesCommand((err as { lastNodeError?: unknown }).lastNodeError, depth + 1)
  );
}

/**
 * A message made printable: known secrets and URL passwords masked, the arguments Redis quotes
 * back ("unknown command 'HELLO', with args beginning with: '3' 'AUTH' …", Redis before 6) cut,
 * control characters escaped.
 */
export function redactText(text: string, secrets: Iterable<string> = []): string {
  let out = text;
  for (const secret of secrets) {
    if (secret === '') continue;
    out = out.split(secret).join(PASSWORD_MASK);
    const encoded = encodeURIComponent(secret);
    if (encoded !== secret) out = out.split(encoded).join(PASSWORD_MASK);
  }
  out = out.replace(/(with args beginning with:).*$/s, '$1 (not shown)');
  return escapeControl(maskUrl(out));
}

/** The word Redis or the OS names a failure by: WRONGPASS, NOPERM, NOGROUP … or ECONNREFUSED, ETIMEDOUT …; undefined when there is none. */
export function failureReason(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return code;
  const text = err instanceof Error ? err.message : typeof err === 'string' ? err : '';
  return /^([A-Z][A-Z_]{2,})\b/.exec(text)?.[1];
}

/**
 * An error the library hands over (listen's callback, the `error` events, a rejected emit/send,
 * health): a message without credentials, the failure's `reason`, the original's stack frames,
 * and as `cause` only a scrubbed copy: never ioredis' `command` / `args`, whose AUTH arguments
 * hold the password.
 */
export class RedisStreamsError extends Error {
  /** WRONGPASS, NOPERM, NOGROUP … (Redis' error prefix) or ECONNREFUSED … (the OS'), when the failure has one. */
  declare readonly reason?: string;
  /** The OS error code (ECONNREFUSED …), as on Node's own errors. */
  declare readonly code?: string;

  constructor(message: string, reason: string | undefined, code: string | undefined, cause?: RedisStreamsError) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'RedisStreamsError';
    // Set only when known: util.inspect prints own properties, `undefined` ones too.
    if (reason !== undefined) Object.defineProperty(this, 'reason', { value: reason, enumerable: true });
    if (code !== undefined) Object.defineProperty(this, 'code', { value: code, enumerable: true });
  }
}

/**
 * The server lacks what the package or an option needs (a version, a command such as `XACKDEL`): no
 * retry cures it, so `listen()` / `start()` reject with it at once (and a reader restarted on such a
 * server, after a failover, reports it and backs off). A RedisStreamsError, as every error the library
 * hands over; its message starts `nestjs-redis-streams: unsupported server:`.
 */
export class UnsupportedServerError extends RedisStreamsError {
  constructor(message: string, reason?: string, code?: string, cause?: RedisStreamsError) {
    super(message, reason, code, cause);
    this.name = 'UnsupportedServerError';
  }

  /** What the library throws: `nestjs-redis-streams: unsupported server: <detail>`. */
  static because(detail: string): UnsupportedServerError {
    return new UnsupportedServerError(`nestjs-redis-streams: unsupported server: ${detail}`);
  }
}
// One class to catch whichever build (ESM or CommonJS) threw it.
brand(UnsupportedServerError, 'UnsupportedServerError');

/**
 * A scrubbed copy of any error (of its class, for an UnsupportedServerError); `where` (the masked URL, what failed) follows the message, which
 * keeps Redis' own prefix first (WRONGPASS …) for whoever tests it. `secrets`: passwords the
 * caller knows (its connection's), besides those in the error's own commands.
 */
export function redactError(err: unknown, where?: string, secrets: Iterable<string> = [], depth = 0): RedisStreamsError {
  if (err instanceof RedisStreamsError && where === undefined) return err;
  const known = authSecrets(err, new Set(secrets));
  const text =
    err instanceof Error
      ? err.message
      : typeof err === 'object' && err !== null && 'message' in err
        ? String(err.message)
        : safeString(err);
  const message = redactText(where === undefined ? text : `${text} (${where})`, known);
  const code = (err as { code?: unknown } | null)?.code;
  const nested = (err as { cause?: unknown } | null)?.cause ?? (err as { lastNodeError?: unknown } | null)?.lastNodeError;
  const cause = nested !== undefined && nested !== null && depth < 3 ? redactError(nested, undefined, known, depth + 1) : undefined;
  const Copy = err instanceof UnsupportedServerError ? UnsupportedServerError : RedisStreamsError;
  const copy = new Copy(message, failureReason(err) ?? cause?.reason, typeof code === 'string' ? code : undefined, cause);
  const frames = err instanceof Error ? (err.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line)) : [];
  if (frames.length > 0) copy.stack = `${copy.name}: ${message}\n${frames.join('\n')}`;
  return copy;
}

function safeString(value: unknown): string {
  try {
    return typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    return String(value);
  }
}
