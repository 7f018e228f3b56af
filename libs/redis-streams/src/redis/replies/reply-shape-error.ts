/** A reply that is not of the shape its command promises: named, with a short preview of what came. */
export class ReplyShapeError extends Error {
  constructor(command: string, reply: unknown) {
    super(`nestjs-redis-streams: unexpected ${command} reply shape: ${safePreview(reply)}`);
    this.name = 'ReplyShapeError';
  }
}

function safePreview(value: unknown): string {
  try {
    return JSON.stringify(value)?.slice(0, 200) ?? String(value);
  } catch {
    return String(value);
  }
}
