import { concatMap, defer, from, ignoreElements, interval, type Observable } from 'rxjs';
import { describeError } from '../../describe-error.js';
import type { SettleFetched } from './batch-settler.js';
import { fairKeysOf } from './fair-keys.js';
import { FairQueues } from './fair-queues.js';
import type { FairPlan, SettlePolicy, SettlePolicyDeps } from './settle-policy.js';

/** Fair groups (FairQueues): their slots' renewal is its upkeep, a restart waits for what runs and reads the rest again. */
export class FairPolicy implements SettlePolicy {
  readonly settle: SettleFetched;
  readonly restart$: Observable<never>;
  readonly upkeep$: Observable<unknown>;
  readonly readSize: (asked: number) => number;
  private readonly queues: FairQueues;

  constructor(
    fair: FairPlan,
    private readonly d: SettlePolicyDeps,
  ) {
    const { name, groups, pattern } = fair;
    const { slots, minIdleMs } = d;
    this.queues = new FairQueues({
      pattern: fair.pattern,
      slotKeys: `${slots.slotKeyOf(name, '')}*`,
      decide: d.decide,
      custody: d.custody,
      acks: d.acks,
      concurrency: d.concurrency,
      inHand: groups.inHand,
      keysOf: fairKeysOf(groups.perKey, d.deserializer, { pattern: fair.pattern, logger: d.logger }),
      // A slot lives as long as an entry may sit idle before a peer takes it: a worker that died gives both back together.
      slots: {
        slotKeyOf: (key) => slots.slotKeyOf(name, key),
        exchange: (give, take) => slots.exchange(give, take, groups.inHand, minIdleMs),
        keep: (s) => slots.keep(s, minIdleMs),
      },
      stop: d.stop,
      inProgress: d.inProgress,
      barred: d.barred,
      putBack: d.putBack,
      handBackIdleMs: minIdleMs,
      // Halfway between a renewal's age (leaseRenewMs) and a peer's reclaim (minIdleMs).
      staleAfterMs: (minIdleMs + d.leaseRenewMs) / 2,
      recount: d.recount,
      logger: d.logger,
    });
    this.readSize = (asked) => this.queues.readSize(asked);
    this.settle = (entries, source) => this.queues.accept(entries, source);
    // What runs finishes; what waits is dropped: still pending here, self-drain reads it again (the lease is cleared too).
    this.restart$ = defer(async () => {
      await this.queues.settled();
      this.queues.clear();
    }).pipe(ignoreElements());
    // Every lease renewal: the slots in hand kept, and what has waited since the last one put back uncounted.
    this.upkeep$ = interval(d.leaseRenewMs).pipe(
      concatMap(() =>
        from(
          Promise.all([
            this.queues
              .keepSlots()
              .catch((err: unknown) => d.logger.warn(`could not renew the fair slots of "${pattern}": ${describeError(err)}`)),
            this.queues.uncountWaiting(d.leaseRenewMs),
          ]),
        ),
      ),
    );
  }

  nudge(): void {
    this.queues.nudge();
  }

  async finish(): Promise<void> {
    const { stop, logger } = this.d;
    await stop.bounded(this.queues.settled(), () => 'the handlers in hand', logger);
    await stop
      .bounded(this.queues.handBackWaiting(), () => 'the hand-back of entries waiting in the fair queues', logger)
      .catch((err: unknown) =>
        logger.warn(`hand-back of entries waiting in the fair queues failed, a peer takes them after minIdleMs: ${describeError(err)}`),
      );
  }
}
