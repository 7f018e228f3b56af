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

/**
 * The one slot a fetched entry carries for its custody (the lease's mark), declared when the entry
 * is made: marking it is then a store, where adding a property to a finished object cost a property
 * array and a shape change per entry (measured in the drain bench's heap profile).
 */
export const CUSTODY_SLOT = Symbol('custody slot');

/** An entry as a read reply makes it, its custody slot declared. */
export class FetchedEntry implements StreamEntry {
  [CUSTODY_SLOT]: unknown = undefined;

  constructor(
    readonly stream: string,
    readonly id: string,
    readonly fields: readonly string[] | null,
    public deliveryCount: number,
  ) {}
}

/** Entry ids by stream, in order: one command per stream. */
export function groupIds(entries: readonly StreamEntry[]): Map<string, string[]> {
  const byStream = new Map<string, string[]>();
  // A read's entries come in runs of one stream: the map is looked up once per run, not per entry (the ack's hot path).
  let stream: string | undefined;
  let ids: string[] | undefined;
  for (const e of entries) {
    if (e.stream !== stream) {
      stream = e.stream;
      ids = byStream.get(stream);
      if (!ids) byStream.set(stream, (ids = []));
    }
    ids!.push(e.id);
  }
  return byStream;
}
