import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { repoRoot, requireBuilt } from './support/built.js';

describe('the built package', () => {
  it('imports from plain Node by its package name, as an installed dependency would', () => {
    requireBuilt('libs/redis-streams/dist/esm/index.js');
    requireBuilt('libs/redis-streams/dist/cjs/index.js');
    const script = `
      import 'reflect-metadata';
      import * as lib from 'nestjs-redis-streams';
      const server = new lib.RedisStreamsServer({ group: 'g', consumer: 'c' });
      console.log(JSON.stringify({ exports: Object.keys(lib).sort(), group: server.options.group, transport: String(server.transportId) }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' }));
    expect(out.group).toBe('g');
    expect(out.transport).toBe('Symbol(nestjs-redis-streams)');
    expect(out.exports).toEqual(
      expect.arrayContaining(['RedisStreamsServer', 'RedisStreamsContext', 'StreamPattern', 'RedisStreamsStatus', 'InvalidOptionError']),
    );
  });

  it('packs only what a user needs: both builds with their typings, README, LICENSE (an allow-list)', () => {
    const [pack] = JSON.parse(
      execFileSync('npm', ['pack', '-w', 'nestjs-redis-streams', '--dry-run', '--json'], { cwd: repoRoot, encoding: 'utf8' }),
    );
    const files: string[] = pack.files.map((f: { path: string }) => f.path);
    // terminus/package.json, core/package.json: the `nestjs-redis-streams/terminus` and `/core` entry points for resolvers without "exports" (node10).
    // bin/*.js: the two commands' launchers (package.json "bin"), which import the built CLI.
    const allowed = [
      /^bin\/redis-streams(-dlq)?\.js$/,
      /^package\.json$/,
      /^README\.md$/,
      /^LICENSE$/,
      /^dist\/(esm|cjs)\/.+\.(js|d\.ts)$/,
      /^dist\/cjs\/package\.json$/,
      /^(terminus|core)\/package\.json$/,
    ];
    expect(files.filter((f) => !allowed.some((pattern) => pattern.test(f)))).toEqual([]);
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'LICENSE',
        'dist/esm/index.js',
        'dist/esm/index.d.ts',
        'dist/cjs/index.js',
        'dist/cjs/index.d.ts',
        'dist/cjs/package.json',
        'dist/esm/cli/dlq.js',
        'bin/redis-streams.js',
        'bin/redis-streams-dlq.js',
        'core/package.json',
        'dist/esm/core/index.js',
        'dist/cjs/core/index.js',
      ]),
    );
    // Every module ships in both builds, each with its declarations.
    const modules = (dir: string, ext: string) =>
      files
        .filter((f) => f.startsWith(dir) && f.endsWith(ext))
        .map((f) => f.slice(dir.length, -ext.length))
        .sort();
    expect(modules('dist/cjs/', '.js')).toEqual(modules('dist/esm/', '.js'));
    expect(modules('dist/esm/', '.d.ts')).toEqual(modules('dist/esm/', '.js'));
    expect(modules('dist/cjs/', '.d.ts')).toEqual(modules('dist/cjs/', '.js'));
  });

  it('serves require() with a CommonJS build of the same API', () => {
    const script = `
      require('reflect-metadata');
      const lib = require('nestjs-redis-streams');
      const server = new lib.RedisStreamsServer({ group: 'g', consumer: 'c' });
      console.log(JSON.stringify({ exports: Object.keys(lib).sort(), group: server.options.group, file: require.resolve('nestjs-redis-streams') }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: repoRoot, encoding: 'utf8' }));
    expect(out.group).toBe('g');
    expect(out.file).toMatch(/dist\/cjs\/index\.js$/);
    const esm = JSON.parse(
      execFileSync(
        process.execPath,
        ['--input-type=module', '-e', "import * as lib from 'nestjs-redis-streams'; console.log(JSON.stringify(Object.keys(lib).sort()))"],
        { cwd: repoRoot, encoding: 'utf8' },
      ),
    );
    expect(out.exports).toEqual(esm);
  });

  it('has no dual-package hazard: instanceof and isDeadLetter hold across the ESM and CommonJS copies', () => {
    const script = `
      import 'reflect-metadata';
      import { createRequire } from 'node:module';
      import { RpcException } from '@nestjs/microservices';
      import * as esm from 'nestjs-redis-streams';
      const cjs = createRequire(import.meta.url)('nestjs-redis-streams');
      const args = { stream: 's', pattern: 's', id: '1-0', group: 'g', consumer: 'c', deliveryCount: 1, fields: {}, headers: {} };
      const invalid = (lib) => { try { new lib.RedisStreamsServer({ batchSize: 0 }); } catch (err) { return err; } };
      class Sub extends esm.RedisStreamsContext {}
      console.log(JSON.stringify({
        twoCopies: esm.RedisStreamsContext !== cjs.RedisStreamsContext,
        context: new cjs.RedisStreamsContext(args) instanceof esm.RedisStreamsContext && new esm.RedisStreamsContext(args) instanceof cjs.RedisStreamsContext,
        deadLetter: new cjs.DeadLetterException('x') instanceof esm.DeadLetterException && new esm.DeadLetterException('x') instanceof cjs.DeadLetterException,
        rpc: new cjs.DeadLetterException('x') instanceof RpcException && new esm.DeadLetterException('x') instanceof RpcException,
        isDeadLetter: esm.isDeadLetter(new cjs.DeadLetterException('x')) && cjs.isDeadLetter(new esm.DeadLetterException('x')),
        record: new cjs.RedisStreamsRecord({}) instanceof esm.RedisStreamsRecord && new esm.RedisStreamsRecord({}) instanceof cjs.RedisStreamsRecord,
        invalidOption: invalid(cjs) instanceof esm.InvalidOptionError && invalid(esm) instanceof cjs.InvalidOptionError,
        notEverything: !({} instanceof esm.RedisStreamsContext) && !(new cjs.RedisStreamsContext(args) instanceof Sub),
      }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' }));
    expect(out).toEqual({
      twoCopies: true,
      context: true,
      deadLetter: true,
      rpc: true,
      isDeadLetter: true,
      record: true,
      invalidOption: true,
      notEverything: true,
    });
  });

  it("keeps Nest's line for a failed request whichever build's server marked it, with both builds loaded (review-b)", () => {
    // The default filter is hooked once, by the build whose server came first; a request of the other build's server
    // must still count as a request (Nest's line kept), not as an event whose failure the transport logs itself.
    const script = `
      import 'reflect-metadata';
      import { createRequire } from 'node:module';
      import { Logger } from '@nestjs/common';
      import { BaseRpcExceptionFilter } from '@nestjs/microservices';
      const require = createRequire(import.meta.url);
      const esm = await import('./libs/redis-streams/dist/esm/server/original-errors.js');
      const cjs = require('./libs/redis-streams/dist/cjs/server/original-errors.js');
      const { RedisStreamsContext } = require('nestjs-redis-streams');
      esm.rememberOriginalErrors();
      cjs.rememberOriginalErrors();
      const lines = [];
      Logger.overrideLogger({ log() {}, warn() {}, error: (message) => lines.push(String(message)) });
      const args = { stream: 's', pattern: 's', id: '1-0', group: 'g', consumer: 'c', deliveryCount: 1, fields: {}, headers: {} };
      const replies = [];
      for (const [name, build] of [['esm', esm], ['cjs', cjs]]) {
        const ctx = new RedisStreamsContext(args);
        build.keepNestLogFor(ctx);
        new BaseRpcExceptionFilter().catch(new Error('boom via ' + name), { getArgByIndex: (i) => (i === 1 ? ctx : undefined) })
          .subscribe({ error: (reply) => replies.push(reply) });
      }
      console.log(JSON.stringify({ lines, replies }));
    `;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: repoRoot, encoding: 'utf8' }));
    expect(out).toEqual({
      lines: ['Error: boom via esm', 'Error: boom via cjs'],
      replies: [
        { status: 'error', message: 'Internal server error' },
        { status: 'error', message: 'Internal server error' },
      ],
    });
  });

  it('has interchangeable ESM and CommonJS typings for what a handler and a producer pass around', () => {
    // An ESM app whose CommonJS dependency takes a context or a record from it: TypeScript sees both builds' declarations.
    const dir = `${repoRoot}dist/dual-types`;
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/package.json`, JSON.stringify({ type: 'module' }));
    writeFileSync(
      `${dir}/check.ts`,
      `import { DeadLetterException, RedisStreamsContext, RedisStreamsRecord } from 'nestjs-redis-streams';
import type * as cjs from '../../libs/redis-streams/dist/cjs/index.js';
declare const ctx: RedisStreamsContext;
declare const cjsCtx: cjs.RedisStreamsContext;
export const toCjs: cjs.RedisStreamsContext = ctx;
export const fromCjs: RedisStreamsContext = cjsCtx;
export const record: cjs.RedisStreamsRecord = new RedisStreamsRecord({}, { a: 'b' });
export const error: cjs.DeadLetterException = new DeadLetterException('x');
`,
    );
    writeFileSync(
      `${dir}/tsconfig.json`,
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2023',
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
        },
        include: ['check.ts'],
      }),
    );
    execFileSync(process.execPath, [`${repoRoot}node_modules/typescript/bin/tsc`, '-p', `${dir}/tsconfig.json`], { encoding: 'utf8' });
  });
});
