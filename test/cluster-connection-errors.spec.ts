/**
 * What a cluster's connection failure says (redis/replies/redis-errors.ts): ioredis' Cluster wraps the node's answer as
 * `lastNodeError` of "Failed to refresh slots cache."; the node's answer is explained as on one node (review finding:
 * NOAUTH on a cluster named no fix).
 */
import { ClientProxy, ClientsModule } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { RedisStreamsClient } from 'nestjs-redis-streams';
import { lastValueFrom } from 'rxjs';
import { explainConnectionError, nodeCause, withNodeCause } from '../libs/redis-streams/src/redis/replies/redis-errors.js';
import { captureLogs } from './support/logs.js';
import { freePort } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';

/** The error ioredis' Cluster emits when no node gave it the slots: the node's own answer attached. */
const clusterFailure = (nodeMessage: string) =>
  Object.assign(new Error('Failed to refresh slots cache.'), { lastNodeError: new Error(nodeMessage) });

describe('a cluster connection failure', () => {
  it("NOAUTH: the worker's message and the producer's cause name the fix, as on one node", () => {
    const oneNode = explainConnectionError(new Error('NOAUTH Authentication required.')).message;
    expect(oneNode).toMatch(/requires a password/);
    expect(withNodeCause(clusterFailure('NOAUTH Authentication required.')).message).toContain(oneNode);
    expect(nodeCause(clusterFailure('NOAUTH Authentication required.')).message).toBe(oneNode);
  });

  it("WRONGPASS: the node's refusal, as it is", () => {
    const message = 'WRONGPASS invalid username-password pair or user is disabled.';
    expect(nodeCause(clusterFailure(message)).message).toBe(message);
    expect(withNodeCause(clusterFailure(message)).message).toBe(`Failed to refresh slots cache. ${message}`);
  });

  it('without a node answer: the failure as it is', () => {
    const failure = new Error('Connection is closed.');
    expect(nodeCause(failure)).toBe(failure);
    expect(withNodeCause(failure)).toBe(failure);
  });
});

describe('a cluster whose seed port refuses connections (nothing listens there)', () => {
  const startApp = useApps();

  it('the producer\'s emit and its log name ECONNREFUSED, as on one node (review finding: only "Connection is closed.")', async () => {
    const port = await freePort();
    const logs = captureLogs();
    const options = { connection: { cluster: [`redis://127.0.0.1:${port}`] }, commandTimeoutMs: 1500 };
    const moduleRef = await Test.createTestingModule({
      imports: [ClientsModule.register([{ name: 'ORDERS', customClass: RedisStreamsClient, options }])],
    }).compile();
    moduleRef.useLogger(logs.logger);
    await moduleRef.init();
    const client = moduleRef.get<ClientProxy>('ORDERS');
    try {
      const failure = await lastValueFrom(client.emit('orders', { n: 1 })).then(
        () => expect.fail('the emit should have failed'),
        (err: Error) => err,
      );
      expect(failure.message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
      expect(logs.text()).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
    } finally {
      await moduleRef.close();
    }
  });

  it("the worker's start failure names ECONNREFUSED", async () => {
    const port = await freePort();
    const failure = await startApp({
      connection: { cluster: [`redis://127.0.0.1:${port}`] },
      group: 'g',
      keyPrefix: uniquePrefix(),
      startupTimeoutMs: 2000,
      retryInitialDelayMs: 50,
    }).then(
      () => expect.fail('the start should have failed'),
      (err: Error) => err,
    );
    expect(failure.message).toContain(`ECONNREFUSED 127.0.0.1:${port}`);
  });
});
