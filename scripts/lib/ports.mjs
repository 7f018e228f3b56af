// The one free-port picker of the repository's tests, scripts and benchmark (typed in ports.d.mts): the OS picks.
import { createServer } from 'node:net';

const HOST = '127.0.0.1';

/** A free TCP port on 127.0.0.1, picked by the OS (listen on port 0, then close). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, HOST, () => {
      const address = srv.address();
      srv.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * `count` distinct free ports P whose P + `offset` is free too (a cluster node's bus listens on port + 10000),
 * none of them another's P + offset.
 */
export async function freePortPairs(count, offset = 10_000) {
  const ports = [];
  const taken = new Set();
  for (let tries = 0; ports.length < count; tries++) {
    if (tries > 1000) throw new Error(`found no ${count} free port pairs (P, P+${offset}) on ${HOST}`);
    const port = await freePort();
    const pair = port + offset;
    if (pair > 65_535 || taken.has(port) || taken.has(pair) || !(await isFree(pair))) continue;
    taken.add(port).add(pair);
    ports.push(port);
  }
  return ports;
}

function isFree(port) {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, HOST, () => srv.close(() => resolve(true)));
  });
}
