/**
 * The shapes the engine needs from its host, written here so nothing below the Nest adapter
 * imports `@nestjs/*`. Each is structurally Nest's own (LoggerService, Serializer, Deserializer,
 * WritePacket), so a Nest logger or serializer is passed as it is.
 */

/** What the engine logs through: Nest's `LoggerService` fits. */
export interface Logger {
  log(message: string): unknown;
  warn(message: string): unknown;
  /** `stack`: a handler's failure, printed below the line (Nest's `error(message, stack)`). */
  error(message: string, stack?: string): unknown;
}

/** Turns a value into an entry field: Nest's `Serializer` fits. */
export interface Serializer<TInput = unknown, TOutput = string> {
  serialize(value: TInput, options?: Record<string, unknown>): TOutput | Promise<TOutput>;
}

/** Turns an entry field back into a value: Nest's `Deserializer` fits. */
export interface Deserializer<TInput = string, TOutput = unknown> {
  deserialize(value: TInput, options?: Record<string, unknown>): TOutput | Promise<TOutput>;
}

/** One answer to a request, as Nest's RPC proxy writes it. */
export interface WritePacket<T = unknown> {
  err?: unknown;
  response?: T;
  isDisposed?: boolean;
  status?: string;
}
