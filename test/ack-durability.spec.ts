/**
 * AckDurability (consumer/tenure/ack-durability.ts) against its interface: what each wait's answer
 * (a Confirmation: what WAIT or WAITAOF said) makes of an ordered partition's durable acks, and what
 * the owner may then do. It sends no command: the waits are the durable lane's, tested in durable-acks e2e.
 */
import { AckDurability } from '../libs/redis-streams/src/consumer/tenure/ack-durability.js';
import type { ResolvedDurableAcks } from '../libs/redis-streams/src/options/durability-options.js';
import { captureLogs } from './support/logs.js';

/** A partition's durable acks wanting one replica (and `fsync`), held or carrying on when unconfirmed. */
function durabilityOf(whenUnconfirmed: ResolvedDurableAcks['whenUnconfirmed'], fsync = false) {
  const { logger, lines } = captureLogs();
  let changes = 0;
  const wanted: ResolvedDurableAcks = { replicas: 1, fsync, timeoutMs: 500, whenUnconfirmed };
  const d = new AckDurability(wanted, { stream: 'orders', logger, onChange: () => changes++ });
  return { d, lines, changes: () => changes };
}

const stateOf = (d: AckDurability) => [d.view().state, d.mayStart(), d.waitsOnAcks()];

describe('AckDurability', () => {
  it("starts pending: under 'hold' nothing may start before a wait confirmed; under 'carry-on' it may", () => {
    expect(stateOf(durabilityOf('hold').d)).toEqual(['pending', false, true]);
    expect(stateOf(durabilityOf('carry-on').d)).toEqual(['pending', true, true]);
  });

  it("'hold': a wait short of its replicas holds the partition (nothing starts, the acks still wait) until one confirms; each change told once", () => {
    const { d, lines, changes } = durabilityOf('hold');
    expect(d.record({ replicas: 1 })).toBe(true);
    expect([...stateOf(d), changes()]).toEqual(['confirmed', true, true, 1]);
    expect(d.record({ replicas: 0 })).toBe(false);
    expect(d.record({ replicas: 0 })).toBe(false);
    expect([...stateOf(d), changes()]).toEqual(['held', false, true, 2]);
    expect(d.record({ replicas: 2 })).toBe(true);
    expect([...stateOf(d), changes()]).toEqual(['confirmed', true, true, 3]);
    expect(lines).toEqual([
      'warn ordered "orders": acks not confirmed on 1 replica (0 confirmed within 500 ms): the partition is held, nothing starts until the replicas confirm (durableAcks.whenUnconfirmed \'hold\')',
      'log ordered "orders": acks confirmed on 1 replica again: the partition runs again',
    ]);
  });

  it("'carry-on': a wait short of its replicas counts as settled, and the acks stop waiting (degraded) until a beat confirms", () => {
    const { d, lines } = durabilityOf('carry-on');
    expect(d.record({ replicas: 0 })).toBe(true);
    expect(stateOf(d)).toEqual(['degraded', true, false]);
    expect(lines[0]).toMatch(/^warn ordered "orders": acks not confirmed on 1 replica .*DEGRADED/);
    expect(d.record({ replicas: 1 })).toBe(true);
    expect(stateOf(d)).toEqual(['confirmed', true, true]);
    expect(lines[1]).toBe('log ordered "orders": acks confirmed on 1 replica again: durable again');
  });

  it('with fsync: replicas without the master fsynced do not confirm, nor does a refused wait; the state kept beside the owner key says why', () => {
    const { d, lines } = durabilityOf('hold', true);
    expect(d.record({ replicas: 1, fsynced: false })).toBe(false);
    expect(d.record({ replicas: 1, fsynced: true, refused: 'ERR WAITAOF cannot be used when appendonly is disabled' })).toBe(false);
    expect(d.view().last?.refused).toMatch(/WAITAOF/);
    expect(JSON.parse(d.stateText())).toMatchObject({
      state: 'held',
      confirmed: 1,
      replicas: 1,
      fsync: true,
      timeoutMs: 500,
      whenUnconfirmed: 'hold',
      refused: 'ERR WAITAOF cannot be used when appendonly is disabled',
    });
    expect(d.record({ replicas: 1, fsynced: true })).toBe(true);
    expect(lines).toHaveLength(2);
  });

  it("reset: the partition changed hands, and the next owner's first wait decides again", () => {
    const { d, changes } = durabilityOf('hold');
    d.reset();
    d.record({ replicas: 1 });
    d.reset();
    expect(stateOf(d)).toEqual(['pending', false, true]);
    // A reset is the new owner's own start: not a change to tell.
    expect(changes()).toBe(1);
  });
});
