import type { DurabilityView } from './ack-durability.js';
import type { BlockedKey } from './key-queues.js';
import type { OwnershipView } from './partition-owner.js';

/** What health and inspect show of an ordered reader: its partition's ownership, and the keys waiting behind a failed entry. */
export interface OrderingView extends OwnershipView {
  blockedKeys: BlockedKey[];
  /** Entries held in its key queues (queued, running, or behind a failed entry). */
  held: number;
  /** Its durable acks, when it has them (`durableAcks`). */
  durability?: DurabilityView;
}
