/** One scheduled retry: the entry, and when it is due (performance.now()). */
export interface DueItem {
  at: number;
  stream: string;
  id: string;
}

/**
 * The scheduled retries, earliest first (a binary min-heap): the next due time and the due ones
 * come in O(log n) each, not a scan of every waiting entry per beat. Items are not removed when
 * their entry is settled or rescheduled; the caller skips the stale ones it pops.
 */
export class DueHeap {
  private items: DueItem[] = [];

  get size(): number {
    return this.items.length;
  }

  push(item: DueItem): void {
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (a[parent]!.at <= item.at) break;
      a[i] = a[parent]!;
      i = parent;
    }
    a[i] = item;
  }

  peek(): DueItem | undefined {
    return this.items[0];
  }

  pop(): DueItem | undefined {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length === 0 || last === undefined) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= a.length) break;
      const r = l + 1;
      const child = r < a.length && a[r]!.at < a[l]!.at ? r : l;
      if (a[child]!.at >= last.at) break;
      a[i] = a[child]!;
      i = child;
    }
    a[i] = last;
    return top;
  }

  /** Replaces the content (stale items dropped by the caller's rebuild). */
  reset(items: DueItem[]): void {
    this.items = [];
    for (const item of items) this.push(item);
  }
}
