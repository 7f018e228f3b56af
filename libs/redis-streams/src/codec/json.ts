import type { Deserializer, Serializer } from '../ports.js';

/** Default payload serializer: JSON, with an error that says what could not be serialized. */
export class JsonSerializer implements Serializer<unknown, string> {
  serialize(value: unknown): string {
    let text: string | undefined;
    try {
      text = JSON.stringify(value);
    } catch (err) {
      // BigInt and cycles land here ("Do not know how to serialize a BigInt", "circular structure").
      throw new TypeError(`payload is not JSON-serializable: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (text === undefined) throw new TypeError(`payload is not JSON-serializable: ${typeof value}`);
    return text;
  }
}

/** Default payload deserializer: JSON.parse (own properties only, so `__proto__` keys stay data). */
export class JsonDeserializer implements Deserializer<string, unknown> {
  deserialize(value: string): unknown {
    return JSON.parse(value);
  }
}
