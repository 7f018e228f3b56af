import { brand } from '../brand.js';
/** Thrown at construction for a bad option; the message names the option. */
export class InvalidOptionError extends Error {
  constructor(
    readonly option: string,
    reason: string,
  ) {
    super(`nestjs-redis-streams: invalid option "${option}": ${reason}`);
    this.name = 'InvalidOptionError';
  }
}
brand(InvalidOptionError, 'InvalidOptionError');

/** A value as an error message shows it: JSON where it can be (a BigInt or a cycle cannot). */
export function shown(value: unknown): string {
  if (typeof value === 'bigint') return `${value}n`;
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** A typo such as `minIdle` would otherwise silently keep the default. `path` is the object's own (`retry.`). */
export function rejectUnknown(input: object, known: readonly string[], path = ''): void {
  if (typeof input !== 'object' || input === null) throw new InvalidOptionError(path.replace(/\.$/, '') || 'options', 'expected an object');
  for (const key of Object.keys(input)) {
    if (!known.includes(key)) throw new InvalidOptionError(path + key, 'unknown option');
  }
}

export function positiveInt(option: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidOptionError(option, `must be a positive integer, got ${shown(value)}`);
  }
  return value;
}

export function nonEmpty(option: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.trim() === '') {
    throw new InvalidOptionError(option, `must be a non-empty string, got ${shown(value)}`);
  }
  return value;
}

export function string(option: string, value: unknown, fallback: string): string {
  if (value === undefined) return fallback;
  if (typeof value !== 'string') throw new InvalidOptionError(option, 'must be a string');
  return value;
}

/** Nest serializer/deserializer objects: anything with the named method. */
export function withMethod<T>(option: string, value: unknown, method: string, fallback: T): T {
  if (value === undefined) return fallback;
  if (typeof value !== 'object' || value === null || typeof (value as Record<string, unknown>)[method] !== 'function') {
    throw new InvalidOptionError(option, `must be an object with a ${method}() method`);
  }
  return value as T;
}

export function boolean(option: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, `must be true or false, got ${shown(value)}`);
  return value;
}

export function atMost(option: string, value: number, max: number): number {
  if (value > max) throw new InvalidOptionError(option, `must be at most ${max}, got ${value}`);
  return value;
}

/** An object's own fields only: a bound inherited from a prototype is not one the caller set. */
export function ownFields(input: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(input));
}
