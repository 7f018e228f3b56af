/**
 * What a cluster's connection failure says (redis/replies/redis-errors.ts): ioredis' Cluster wraps the node's answer as
 * `lastNodeError` of "Failed to refresh slots cache."; the node's answer is explained as on one node (review finding:
 * NOAUTH on a cluster named no fix).
 */
import { explainConnectionError, nodeCause, withNodeCause } from '../libs/redis-streams/src/redis/replies/redis-errors.js';

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
