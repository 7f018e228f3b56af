import type { Cluster, Redis } from 'ioredis';
import { within } from '../../within.js';
import { slotOf } from '../../slots.js';

/**
 * On a cluster: which master serves a lane's slot, per the cluster's slot map. After a failed
 * park (MOVED, UNBLOCKED from a master turned replica, a dropped node) the slot may have moved:
 * the map is refreshed before the next park.
 */
export class SlotFollower {
  private stale = false;

  constructor(
    private readonly cluster: Cluster,
    private readonly slotKey: string,
  ) {}

  /** A park failed: ask the cluster before the next one. */
  markStale(): void {
    this.stale = true;
  }

  /** `host:port` of the master serving the slot; undefined when the map has none. */
  async master(timeoutMs: number): Promise<string | undefined> {
    if (this.stale) {
      this.stale = false;
      await within(new Promise<void>((resolve) => this.cluster.refreshSlotsCache(() => resolve())), timeoutMs, undefined);
    }
    return this.cluster.slots[slotOf(this.slotKey)]?.[0];
  }

  /** The cluster's ready connection to `target` (`host:port`), to wake a park there. */
  connectionTo(target: string | undefined): Redis | undefined {
    return this.cluster.nodes('all').find((n) => `${n.options.host}:${n.options.port}` === target && n.status === 'ready');
  }
}
