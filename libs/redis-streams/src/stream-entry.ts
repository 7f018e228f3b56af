/** One stream entry as the loop sees it, after the reply was parsed. */
export interface StreamEntry {
  /** Full stream key (prefix included). */
  readonly stream: string;
  readonly id: string;
  /** Field/value pairs in the order Redis returned them; null when the entry was deleted. */
  readonly fields: readonly string[] | null;
  /** Times this entry was delivered to a consumer of the group, this delivery included. */
  deliveryCount: number;
}

/** Entry ids by stream, in order: one command per stream. */
export function groupIds(entries: readonly StreamEntry[]): Map<string, string[]> {
  const byStream = new Map<string, string[]>();
  for (const e of entries) {
    const ids = byStream.get(e.stream);
    if (ids) ids.push(e.id);
    else byStream.set(e.stream, [e.id]);
  }
  return byStream;
}
