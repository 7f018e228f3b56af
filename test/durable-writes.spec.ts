import { DurableWrites, DurableWriteNotSent } from '../libs/redis-streams/src/redis/produce/durable-writes.js';

// What DurableWrites sends when, against a connection whose answers the test chooses: a cluster node that
// answers MOVED for the write (a slot moving in a failover), and a slot refresh the test lets finish.
describe('DurableWrites: a redirected write whose writer gave up', () => {
  it('is withdrawn while the slot map refreshes: never sent again (review finding: sent 2 s after its caller was told "timed out")', async () => {
    const sent: string[][] = [];
    let refreshed!: () => void;
    const conn = {
      slots: [] as string[][],
      pipeline() {
        const batch: string[] = [];
        return {
          call: (...args: string[]) => void batch.push(args.join(' ')),
          sendCommand: (c: { name: string; args: string[] }) => void batch.push([c.name, ...c.args].join(' ')),
          exec: async () => {
            sent.push(batch);
            // The write refused with a redirection, the WAIT after it answered (0 replicas).
            return [
              [new Error('MOVED 3999 127.0.0.1:7001'), null],
              [null, 0],
            ];
          },
        };
      },
      refreshSlotsCache: (done: () => void) => void (refreshed = done),
    };
    const writes = new DurableWrites(conn as never, true);
    const gaveUp = new AbortController();
    const written = writes.write('k', { replicas: 1, fsync: false, timeoutMs: 100 }, [['XADD', 'k', '*', 'n', '1']], gaveUp.signal);
    written.catch(() => undefined);
    // Sent once, redirected: it waits for the refresh.
    while (refreshed === undefined) await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toHaveLength(1);
    gaveUp.abort();
    await expect(written).rejects.toBeInstanceOf(DurableWriteNotSent);
    refreshed();
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toHaveLength(1);
  });
});
