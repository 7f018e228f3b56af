/** Types of scripts/local-cluster.mjs (plain JS, no build): a throwaway local 6-node Redis Cluster. */
export interface LocalCluster {
  /** redis://127.0.0.1:<port> of all 6 nodes (3 masters, 3 replicas). */
  readonly urls: string[];
  readonly ports: number[];
  /** Kills every node (by pid) and removes the temp dir; idempotent. */
  stop(): Promise<void>;
}

/** Starts the cluster; resolves once every node reports cluster_state:ok. `log` receives progress lines. */
export function startLocalCluster(options?: { log?: (line: string) => void }): Promise<LocalCluster>;

/** `count` random base ports below 45000 whose port and cluster bus port (+10000) are both free on 127.0.0.1. */
export function pickPorts(count: number): Promise<number[]>;
