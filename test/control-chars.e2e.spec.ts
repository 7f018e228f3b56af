import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { RpcException } from '@nestjs/microservices';
import { repoRoot, requireBuilt } from './support/built.js';
import { captureLogs } from './support/logs.js';
import { deadLetterKey, startRedis, type TestRedis } from './support/redis-server.js';
import { uniquePrefix, useApps } from './support/test-app.js';
import { waitFor } from './support/wait-for.js';
import { createGroup } from './support/backlog.js';

// Issue 20, item 3: what producers (or anyone with write access) put in entries, dead letters,
// key, group and consumer names must reach neither the operator's terminal nor the logs raw.

let redis: TestRedis;
beforeAll(async () => (redis = await startRedis({ standalone: true })));
afterAll(async () => redis?.stop());

const start = useApps();

/** Clears the screen, retitles the window, rings the bell; then DEL and an 8-bit CSI (C1). */
const HOSTILE = '\x1b[2J\x1b]0;pwned\x07';
const C1 = '\x7f\u009b2J';
/** Any control character but the line breaks the tools print themselves. */
// eslint-disable-next-line no-control-regex -- what the test looks for
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

async function cli(bin: 'dlq' | 'redis-streams', ...args: string[]): Promise<string> {
  const script = requireBuilt(`libs/redis-streams/dist/esm/cli/${bin}.js`);
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [script, ...args, '--url', redis.url], { cwd: repoRoot });
  return stdout + stderr;
}

function expectEscaped(output: string, ...visible: string[]): void {
  expect(output).not.toMatch(RAW_CONTROL);
  for (const v of visible) expect(output).toContain(v);
}

describe('control characters written by producers are escaped', () => {
  it('in every column of dlq list and dlq find, as text and as JSON', async () => {
    const key = `${uniquePrefix()}orders`;
    const dead = deadLetterKey(key);
    const r = redis.client();
    await r.xadd(
      dead,
      '*',
      'stream',
      `${key}${HOSTILE}`,
      'sourceId',
      `1-1${HOSTILE}`,
      'group',
      `g${HOSTILE}`,
      'consumer',
      `c${HOSTILE}`,
      'deliveryCount',
      '1',
      'error',
      `boom${HOSTILE}${C1}`,
      'fields',
      JSON.stringify(['data', JSON.stringify(HOSTILE), 'note', `${HOSTILE}${C1}`]),
      'deadAt',
      String(Date.now()),
    );
    const text = await cli('dlq', 'list', dead);
    expectEscaped(text, `${key}\\x1b[2J\\x1b]0;pwned\\x07`, 'boom\\x1b[2J\\x1b]0;pwned\\x07\\x7f\\x9b2J', '1-1\\x1b[2J');
    const json = await cli('dlq', 'list', dead, '--json');
    expectEscaped(json, '\\u001b]0;pwned\\u0007', '\\u007f\\u009b2J');
    // Still JSON, of the same value.
    expect(JSON.parse(json.trim()).error).toBe(`boom${HOSTILE}${C1}`);
    expectEscaped(await cli('dlq', 'find', key), `${dead}  1 entry`);
  });

  it('in redis-streams inspect: stream, group and consumer names', async () => {
    const key = `${uniquePrefix()}orders${HOSTILE}`;
    const r = redis.client();
    await createGroup(r, key, `g${HOSTILE}`);
    await r.call('XGROUP', 'CREATECONSUMER', key, `g${HOSTILE}`, `c${HOSTILE}${C1}`);
    expectEscaped(
      await cli('redis-streams', 'inspect', key),
      'orders\\x1b[2J\\x1b]0;pwned\\x07',
      'group g\\x1b[2J',
      'c\\x1b[2J\\x1b]0;pwned\\x07\\x7f\\x9b2J',
    );
    const json = await cli('redis-streams', 'inspect', key, '--json');
    expectEscaped(json, '\\u001b[2J');
    expect(JSON.parse(json)[0].groups[0].consumers[0].name).toBe(`c${HOSTILE}${C1}`);
  });

  it("in the worker's log lines: a handler error quoting the entry, an entry that does not decode", async () => {
    const logs = captureLogs();
    const app = await start(
      { connection: redis.url, group: 'g', keyPrefix: uniquePrefix(), blockMs: 50, maxDeliveries: 2 },
      { logger: logs.logger },
    );
    // An RpcException: Nest's own exception filter logs a plain Error itself, raw (Nest's line, not ours).
    app.recorder.behavior = (call) => {
      throw new RpcException(`cannot ship ${(call.payload as { note: string }).note}`);
    };
    const r = redis.client();
    await r.xadd(app.key(), '*', 'data', JSON.stringify({ note: `${HOSTILE}${C1}` }));
    await r.xadd(app.key(), '*', 'data', HOSTILE);
    await waitFor(() => app.settled.filter((e) => e.outcome !== 'acked').length >= 2, {
      message: 'both entries to be settled as failed or dead-lettered',
    });
    expect(logs.text()).toContain('cannot ship');
    expectEscaped(logs.text(), 'cannot ship \\x1b[2J\\x1b]0;pwned\\x07\\x7f\\x9b2J', 'cannot decode entry');
  });
});
