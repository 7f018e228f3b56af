/** Types of scripts/local-cluster.mjs (plain JS, no build): a throwaway local 6-node Redis Cluster. */
import type { RedisServerProcess } from './lib/redis-server.mjs';

/** cluster-node-timeout of the nodes, in ms. */
export const NODE_TIMEOUT_MS: number;

export interface LocalCluster {
  /** redis://127.0.0.1:<port> of all 6 nodes (3 masters, 3 replicas). */
  readonly urls: string[];
  readonly ports: number[];
  /** The temp dir of the nodes' configs and logs (removed by stop()). */
  readonly dir: string;
  /** The spawned server of node `port` (throws for a port not of this cluster). */
  node(port: number): RedisServerProcess;
  /** One command on node `port` through a polling connection of the spawner's own (rejects at once on a dead node). */
  call(port: number, command: string, ...args: (string | number)[]): Promise<unknown>;
  /** The last `lines` (default 15) lines of node `port`'s log. */
  logTail(port: number, lines?: number): Promise<string>;
  /** A crashed node's bug report (from "=== REDIS BUG REPORT START", or VALKEY, 60 lines) since its last start, or null. */
  crashReport(port: number): Promise<string | null>;
  /**
   * Starts dead node `port` again as the same node (same port, dir and nodes.conf: it rejoins under its old id, a
   * master whose slots were taken over as a replica of the node that took them); resolves once it answers PING.
   */
  revive(port: number): Promise<void>;
  /** Kills every node (by pid) and removes the temp dir; idempotent. */
  stop(): Promise<void>;
}

export interface LocalClusterOptions {
  /** Receives progress lines. */
  log?: (line: string) => void;
  /** Nodes in their own process group, so a terminal's Ctrl-C reaches only this process (default true). */
  detached?: boolean;
  /** On SIGINT/SIGTERM: kill the nodes `'always'`, or only `'when-unhandled'` by another listener (default). */
  signals?: 'always' | 'when-unhandled';
  /** A further readiness check, run inside the start (so within its retry and its log capture). */
  ready?: (cluster: LocalCluster) => Promise<void>;
}

/** Starts the cluster; resolves once every node reports cluster_state:ok (and `ready` resolved). */
export function startLocalCluster(options?: LocalClusterOptions): Promise<LocalCluster>;
