/**
 * `instanceof` across the package's two builds. An app, or a library it uses, may load both the
 * ESM and the CommonJS entry, and then holds two copies of each class. A global symbol on the
 * prototype marks instances, so `x instanceof RedisStreamsContext` holds whichever copy made x.
 */
export function brand(cls: abstract new (...args: never[]) => object, name: string): void {
  const mark = brandMark(name);
  Object.defineProperty(cls.prototype, mark, { value: true });
  Object.defineProperty(cls, Symbol.hasInstance, {
    value(this: unknown, value: unknown): boolean {
      if (Function.prototype[Symbol.hasInstance].call(this, value)) return true;
      // Only the branded class itself answers for the other copy's instances, not its subclasses.
      return this === cls && typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[mark] === true;
    },
  });
}

/** The symbol `brand(cls, name)` puts on the prototype: `x[brandMark(name)] === true` holds for instances of either copy. */
export function brandMark(name: string): symbol {
  return Symbol.for(`nestjs-redis-streams/${name}`);
}
