/**
 * ServerOffer (consumer/read/server-offer.ts) against its interface, fed what the file's real server
 * offers (detectServerFeatures, as a reader's start does): its answers per server version. npm test
 * runs it on Redis 7.0 (`redis-server`); `REDIS_SERVER_BIN=redis8-server` on Redis 8.6, Valkey too.
 */
import { randomUUID } from 'node:crypto';
import { MAX_CLAIM_STREAMS, ServerOffer } from '../libs/redis-streams/src/consumer/read/server-offer.js';
import { describeFeatures, detectServerFeatures, type ServerFeatures } from '../libs/redis-streams/src/redis/server-features.js';
import { aclUser } from './support/acl.js';
import { serverFeatures } from './support/server-features.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();

/** What each server this suite runs on offers a reader: the read's CLAIM (8.4), XACKDEL (8.2), WAITAOF (7.2). */
function expected(server: string): { claim: boolean; ackDelete: boolean; waitAof: boolean } {
  if (/^Redis 7\.0\./.test(server)) return { claim: false, ackDelete: false, waitAof: false };
  if (/^Redis 8\.6\./.test(server)) return { claim: true, ackDelete: true, waitAof: true };
  if (/^Valkey (8|9)\./.test(server)) return { claim: false, ackDelete: false, waitAof: true };
  throw new Error(`no expectation written for ${server}: add its row`);
}

describe('ServerOffer', () => {
  it('offers nothing before the first start, whatever the options ask', () => {
    const offer = new ServerOffer(true, 'this-group', true, true);
    expect([offer.features, offer.claimsOnRead(1), offer.ackDelete, offer.unmet()]).toEqual([undefined, false, undefined, undefined]);
  });

  it("answers as the file's server: the read's CLAIM up to MAX_CLAIM_STREAMS streams, never for an ordered stream; acks that delete", async () => {
    const found = await serverFeatures(redis);
    const want = expected(found.server);
    const offer = new ServerOffer(true, 'this-group');
    // The first start: nothing to compare with, nothing said.
    expect(offer.record(found)).toBeUndefined();
    expect(offer.claimsOnRead(1)).toBe(want.claim);
    expect(offer.claimsOnRead(MAX_CLAIM_STREAMS)).toBe(want.claim);
    expect(offer.claimsOnRead(MAX_CLAIM_STREAMS + 1)).toBe(false);
    expect(offer.ackDelete).toBe(want.ackDelete ? 'KEEPREF' : undefined);
    const ordered = new ServerOffer(true, 'all-groups', false);
    ordered.record(found);
    expect(ordered.claimsOnRead(1)).toBe(false);
    expect(ordered.ackDelete).toBe(want.ackDelete ? 'ACKED' : undefined);
    // Without deleteOnAck: plain XACK on every server.
    const plain = new ServerOffer(true);
    plain.record(found);
    expect([plain.ackDelete, plain.unmet()]).toEqual([undefined, undefined]);
  });

  it("offered CLAIM (as Redis 8.4+ is): not past MAX_CLAIM_STREAMS, never for an ordered stream (CLAIM serves the most idle first, out of their keys' order)", async () => {
    const claiming: ServerFeatures = { ...(await serverFeatures(redis)), claimOnRead: true };
    const offer = new ServerOffer(true);
    offer.record(claiming);
    expect([offer.claimsOnRead(MAX_CLAIM_STREAMS), offer.claimsOnRead(MAX_CLAIM_STREAMS + 1)]).toEqual([true, false]);
    const ordered = new ServerOffer(true, false, false);
    ordered.record(claiming);
    expect(ordered.claimsOnRead(1)).toBe(false);
  });

  it("says what the options need that the file's server lacks: XACKDEL for deleteOnAck, WAITAOF for fsync", async () => {
    const found = await serverFeatures(redis);
    const want = expected(found.server);
    const deleting = new ServerOffer(true, 'this-group');
    deleting.record(found);
    expect(deleting.unmet()).toBe(
      want.ackDelete
        ? undefined
        : `deleteOnAck: 'this-group' needs XACKDEL (Redis 8.2 or later); the server is ${found.server}: remove deleteOnAck, or run Redis 8.2 or later`,
    );
    const fsync = new ServerOffer(true, false, false, true);
    fsync.record(found);
    expect(fsync.unmet()).toBe(
      want.waitAof
        ? undefined
        : `durableAcks.fsync needs WAITAOF (Redis or Valkey 7.2 or later); the server is ${found.server}: drop fsync, or run a newer server`,
    );
  });

  it('newerCommands: false takes none of the newer commands, and says so when deleteOnAck needs one', async () => {
    const found = await serverFeatures(redis);
    const offer = new ServerOffer(false, 'this-group');
    offer.record(found);
    expect([offer.claimsOnRead(1), offer.ackDelete]).toEqual([false, undefined]);
    expect(offer.unmet()).toBe(
      "deleteOnAck: 'this-group' needs XACKDEL (Redis 8.2 or later), which newerCommands: false turns off: drop one of the two options",
    );
  });

  it('a user refused COMMAND: nothing newer is taken, and deleteOnAck names the rights to grant', async () => {
    const name = `so-${randomUUID().slice(0, 8)}`;
    const user = await aclUser(redis.client(), redis.port, name, '', ['on', '>pw', '~*', '&*', '+@all', '-command']);
    const conn = redis.newClient();
    await conn.call('AUTH', user.username, user.password);
    const found = await detectServerFeatures(conn);
    expect(found.lookupError).toMatch(/NOPERM/);
    const offer = new ServerOffer(true, 'this-group', true, true);
    offer.record(found);
    expect([offer.claimsOnRead(1), offer.ackDelete]).toEqual([false, undefined]);
    expect(offer.unmet()).toMatch(
      /needs XACKDEL .* refused COMMAND INFO \(NOPERM.*\): on Redis 8\.2 or later, grant the user \+command\|info \+command\|docs$/,
    );
  });

  it('a restart that finds other features (a failover to another server) says what they are; the same ones say nothing', async () => {
    const found = await serverFeatures(redis);
    const offer = new ServerOffer(true);
    offer.record(found);
    expect(offer.record(found)).toBeUndefined();
    const other: ServerFeatures = { ...found, server: 'Redis 8.6.3', claimOnRead: !found.claimOnRead, ackDelete: true };
    expect(offer.record(other)).toMatch(/^Redis 8\.6\.3: /);
    expect(offer.claimsOnRead(1)).toBe(other.claimOnRead);
    // Back on the first server: said again, as describeFeatures words it.
    expect(offer.record(found)).toBe(describeFeatures(found));
  });
});
