/**
 * The Nest fast path (server/nest-fast-path.ts) stands in only for Nest code it was checked against.
 * This test fails when the installed Nest's code differs (a Nest upgrade): every entry then takes
 * Nest's full chain, correct but slower. Before adding the new fingerprints it prints, read the
 * changed functions against the fast path (each guard, interceptor, pipe, parameter or hook Nest runs
 * must make `argsOf` answer undefined; errors must reach the exception handler as RpcProxy hands them),
 * and run test/nest-fast-path.e2e.spec.ts.
 */
import { Controller, type INestMicroservice } from '@nestjs/common';
import { Payload } from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { RedisStreamsServer, StreamPattern } from 'nestjs-redis-streams';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { nestCodeReview } from '../libs/redis-streams/src/server/nest-fast-path.js';

@Controller()
class Bare {
  @StreamPattern('bare')
  handle(@Payload() _payload: unknown) {}
}

/** A package's version (Nest 12's exports map has no `./package.json`: read beside its entry point). */
const versionOf = (name: string): string =>
  (JSON.parse(readFileSync(join(dirname(createRequire(import.meta.url).resolve(name)), 'package.json'), 'utf8')) as { version: string })
    .version;

describe('Nest fast path: the installed Nest is code the fast path was checked against', () => {
  let app: INestMicroservice | undefined;
  afterEach(async () => app?.close());

  it('the chain (RpcContextCreator and what it calls) and the static eventHandler have reviewed fingerprints', async () => {
    const moduleRef = await Test.createTestingModule({ controllers: [Bare] }).compile();
    const server = new RedisStreamsServer({ connection: { host: '127.0.0.1', port: 1 } });
    app = moduleRef.createNestMicroservice({ strategy: server, logger: false });
    // init registers the handlers (listen would connect).
    await app.init();
    const creator = (app as unknown as { microservicesModule: { listenersController: { contextCreator: object } } }).microservicesModule
      .listenersController.contextCreator;
    const handler = (server as unknown as { messageHandlers: Map<string, unknown> }).messageHandlers.get('bare');
    const review = nestCodeReview(creator, handler);
    const nest = `@nestjs/microservices ${versionOf('@nestjs/microservices')}, @nestjs/core ${versionOf('@nestjs/core')}`;
    expect(review.checked, `unreviewed Nest code: ${nest}: chain ${review.chain}, eventHandler ${review.eventHandler}`).toEqual([
      true,
      true,
    ]);
  });
});
