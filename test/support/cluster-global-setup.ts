import type { TestProject } from 'vitest/node';
import { startCluster, type TestCluster } from './redis-cluster.js';

let cluster: TestCluster | undefined;

/** One local Redis Cluster for every file of the `cluster` project (starting one takes seconds). */
export async function setup(project: TestProject): Promise<void> {
  cluster = await startCluster();
  project.provide('redisClusterUrls', cluster.urls);
}

export async function teardown(): Promise<void> {
  await cluster?.stop();
}
