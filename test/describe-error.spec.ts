/** What describeHandlerError / handlerStack make of a handler's failure: masked, escaped, bounded (issue 22 item 3 review). */
import { RpcException } from '@nestjs/microservices';
import { describeError, describeHandlerError, handlerStack } from '../libs/redis-streams/src/describe-error.js';

describe('describeHandlerError and handlerStack', () => {
  it("an RpcException wrapping an ioredis error: the inner error's AUTH password is masked", () => {
    const inner = Object.assign(new Error('failed AUTH u hunter2'), { command: { name: 'auth', args: ['u', 'hunter2'] } });
    const rpc = new RpcException(inner);
    expect(describeHandlerError(rpc)).toBe('RpcException: failed AUTH u ***');
    expect(handlerStack(rpc) ?? '').not.toContain('hunter2');
  });

  it('a stack formatted before name changed: message lines shaped like frames are not taken for frames', () => {
    const e = new Error('card\n    at forged3 (evil.js:3:3)');
    void e.stack;
    e.name = 'CardDeclined';
    const lines = handlerStack(e)!.split('\n');
    expect(lines[0]).toBe('CardDeclined: card\\x0a    at forged3 (evil.js:3:3)');
    expect(lines.slice(1).length).toBeGreaterThan(0);
    for (const line of lines.slice(1)) expect(line).toMatch(/^\s+at (?!forged3)/);
  });

  it('a stack formatted before message changed: its lines are shown as unverified, none can pass for a frame', () => {
    const e = new Error('card\n    at forged4 (evil.js:4:4)');
    void e.stack;
    e.message = 'card declined';
    const lines = handlerStack(e)!.split('\n');
    expect(lines[0]).toBe('Error: card declined');
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines.slice(1)) expect(line).not.toMatch(/^\s+at /);
    expect(lines.join('\n')).toContain('describe-error.spec.ts');
  });

  it('a huge message is cut, saying how much was left out; the stack head too', () => {
    const e = new Error(`card declined ${'x'.repeat(20_000_000)}`);
    const described = describeHandlerError(e);
    expect(described.length).toBeLessThan(8300);
    expect(described).toMatch(/^Error: card declined x+… \(19991\d\d\d more characters\)$/);
    expect(handlerStack(e)!.length).toBeLessThan(20_000);
    expect(describeError(e).length).toBeLessThan(8300);
  });

  it('a circular object and a BigInt holder are described by their content, not "[object Object]"', () => {
    const circular: Record<string, unknown> = { code: 'E42' };
    circular.self = circular;
    expect(describeHandlerError(circular)).toMatch(/^Object: .*code: 'E42'.*\[Circular/);
    expect(describeHandlerError({ amount: 10n })).toBe('Object: { amount: 10n }');
  });
});
