/** A free TCP port on 127.0.0.1, picked by the OS. */
export function freePort(): Promise<number>;

/** `count` distinct free ports P on 127.0.0.1 whose P + `offset` (default 10000: a cluster node's bus port) is free too. */
export function freePortPairs(count: number, offset?: number): Promise<number[]>;
