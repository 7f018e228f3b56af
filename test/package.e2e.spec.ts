import { execFileSync } from 'node:child_process';
import { repoRoot, requireBuilt } from './support/built.js';

describe('the built package', () => {
  it('imports from plain Node by its package name, as an installed dependency would', () => {
    requireBuilt('libs/redis-streams/dist/index.js');
    const script = `
      import 'reflect-metadata';
      import * as lib from 'nestjs-redis-streams';
      const server = new lib.RedisStreamsServer({ group: 'g', consumer: 'c' });
      console.log(JSON.stringify({ exports: Object.keys(lib).sort(), group: server.options.group, transport: String(server.transportId) }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' }));
    expect(out.group).toBe('g');
    expect(out.transport).toBe('Symbol(nestjs-redis-streams)');
    expect(out.exports).toEqual(expect.arrayContaining(['RedisStreamsServer', 'RedisStreamsContext', 'StreamPattern', 'RedisStreamsStatus', 'InvalidOptionError']));
  });

  it('packs the build output and its typings, not the sources', () => {
    const [pack] = JSON.parse(execFileSync('npm', ['pack', '-w', 'nestjs-redis-streams', '--dry-run', '--json'], { cwd: repoRoot, encoding: 'utf8' }));
    const files: string[] = pack.files.map((f: { path: string }) => f.path);
    expect(files).toEqual(expect.arrayContaining(['package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/server/redis-streams.server.js']));
    expect(files.filter((f) => f.startsWith('src/') || f.endsWith('.tsbuildinfo'))).toEqual([]);
  });
});
