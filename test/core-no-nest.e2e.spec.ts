import { spawnSync } from 'node:child_process';
import { repoRoot, requireBuilt } from './support/built.js';
import { CLUSTER_MODE } from './support/redis-server.js';
import { uniquePrefix } from './support/test-app.js';
import { useRedis } from './support/use-redis.js';

const redis = useRedis();

const fixture = (name: string) => `${repoRoot}test/fixtures/plain-node/${name}`;

/** A child Node process under deny-nest.cjs: any @nestjs/* resolution, by import or require(), fails it. */
function runDenyingNest(script: string, ...args: string[]): { status: number | null; out: string; err: string } {
  const child = spawnSync(process.execPath, ['--require', fixture('deny-nest.cjs'), fixture(script), redis.url, uniquePrefix(), ...args], {
    cwd: repoRoot,
    encoding: 'utf8',
    timeout: 20_000,
    killSignal: 'SIGKILL',
    // NODE_ENV=test would be inherited from Vitest: the child is a plain app.
    env: { ...process.env, NODE_ENV: 'production' },
  });
  return { status: child.status, out: child.stdout, err: child.stderr };
}

// Child processes given one URL: the one-node run covers it.
describe.skipIf(CLUSTER_MODE)('nestjs-redis-streams/core loads no @nestjs/* module', () => {
  beforeAll(() => {
    requireBuilt('libs/redis-streams/dist/esm/core/index.js');
    requireBuilt('libs/redis-streams/dist/cjs/core/index.js');
  });

  it('consumes an entry from an ES module that imports only nestjs-redis-streams/core and ioredis', () => {
    const run = runDenyingNest('smoke.mjs');
    expect(run.err).toBe('');
    expect(run.status).toBe(0);
    expect(JSON.parse(run.out)).toEqual({ payload: { n: 1 }, context: true });
  });

  it('consumes an entry from CommonJS that requires only nestjs-redis-streams/core and ioredis, from the CommonJS build', () => {
    const run = runDenyingNest('smoke.cjs');
    expect(run.err).toBe('');
    expect(run.status).toBe(0);
    expect(JSON.parse(run.out)).toMatchObject({
      payload: { n: 1 },
      context: true,
      file: expect.stringMatching(/dist\/cjs\/core\/index\.js$/),
    });
  });

  it('the guard itself: the main entry (the Nest adapter) fails both children on its first @nestjs/* resolution', () => {
    const esm = runDenyingNest('smoke.mjs', 'main');
    expect(esm.status).not.toBe(0);
    expect(esm.err).toMatch(/deny-nest: import "@nestjs\//);
    const cjs = runDenyingNest('smoke.cjs', 'main');
    expect(cjs.status).not.toBe(0);
    expect(cjs.err).toMatch(/deny-nest: require\('@nestjs\//);
  });
});
