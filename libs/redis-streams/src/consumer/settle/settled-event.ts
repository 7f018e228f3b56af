/** How an entry reached the loop: self-drain of its own PEL, reclaim from a peer, or a new delivery. */
export type DeliverySource = 'drain' | 'reclaim' | 'new';

export type SettleOutcome =
  /** The handler succeeded and the entry was acked. */
  | 'acked'
  /** The handler failed (or timed out): the entry stays pending and comes back through reclaim. */
  | 'failed'
  /** Moved to the dead-letter stream and acked: poison, undecodable, too large, unanswerable, or refused by the handler. */
  | 'dead-lettered';

/** What the loop reports for every entry it finished with. */
export interface SettledEvent {
  stream: string;
  id: string;
  outcome: SettleOutcome;
  deliveryCount: number;
  source: DeliverySource;
  /** Why it failed: what the handler threw (not Nest's "Internal server error" stand-in), or the transport's reason. */
  error?: unknown;
  /**
   * When `outcome` is `'failed'`: about how long until it is tried again (its retry policy's
   * delay, or a RetryLaterException's; without either, the idle time after which it is claimed back).
   */
  retryInMs?: number;
  /** Id of the entry in the dead-letter stream, when `outcome` is `'dead-lettered'`. */
  deadLetterId?: string;
}
