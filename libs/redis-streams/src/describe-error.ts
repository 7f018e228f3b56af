import { authSecrets, redactText } from './redact.js';

/**
 * One readable line for any failure, safe to log: Nest hands handler errors over as
 * `{ status, message }` objects; passwords (the error's own AUTH arguments, any URL's) are
 * masked and control characters escaped (a handler's message may quote the entry).
 */
export function describeError(error: unknown): string {
  return redactText(rawMessage(error), authSecrets(error));
}

function rawMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'message' in error) return String((error as { message: unknown }).message);
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
