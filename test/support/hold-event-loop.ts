/**
 * Holds this process's event loop for `ms` (a synchronous handler, a busy machine): no timer, lease
 * renewal or read of this process runs meanwhile; other processes (Redis, a peer) go on.
 */
export function holdEventLoop(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    /* held: no timer of this process runs */
  }
}
