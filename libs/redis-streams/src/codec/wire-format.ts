/**
 * Field names of the entries this package writes and reads. Producers in any language can
 * write the same fields (README, "Wire format").
 */
export const FIELD = {
  /** Serialized payload (JSON by default). Entries without it dispatch their field map. */
  data: 'data',
  /** JSON object of string values: correlation, trace ids … (`ctx.getHeaders()`). */
  headers: 'headers',
  /** Request entries: the id the reply carries back. */
  correlationId: 'correlationId',
  /** Request entries: the stream the reply is appended to. */
  replyTo: 'replyTo',
  /** Reply entries: the serialized error, when the handler failed. */
  err: 'err',
  /** Reply entries: `'1'` on the last reply of a request. */
  done: 'done',
  /**
   * The record's partition key (`RedisStreamsRecord`'s `partitionKey`, or the client's `partitionKey`
   * function), on every stream: an ordered pattern handles the entries of one key one at a time, in
   * id order. Absent: the entry is its own key (ordered with nothing).
   */
  partitionKey: 'partitionKey',
  /** Entries a repeatable schedule fired: the schedule's id (docs/guide/schedules.md). */
  scheduleId: 'scheduleId',
  /** Entries a repeatable schedule fired: the fire time, Unix ms (the entry is never visible before it). */
  fireTime: 'fireTime',
} as const;
