/**
 * runInContext (telemetry/run-in-context.ts): a handler's work runs exactly once in its span's context, whatever the
 * app's context manager does, and its outcome is the handler's (review findings: a manager that threw after the call
 * made a success a failure that ran again; one that returned without calling it acked a batch that never ran).
 */
import * as api from '@opentelemetry/api';
import { runInContext } from '../libs/redis-streams/src/telemetry/run-in-context.js';
import { disableOtelGlobals } from './support/otel.js';

const KEY = api.createContextKey('run-in-context test');
const context = api.ROOT_CONTEXT.setValue(KEY, 'inside');

/** A context manager whose `with` does `behave` around the call it is given. */
function manager(behave: (call: () => unknown) => unknown): api.ContextManager {
  let active = api.ROOT_CONTEXT;
  return {
    active: () => active,
    with: ((ctx: api.Context, fn: () => unknown) => {
      return behave(() => {
        const before = active;
        active = ctx;
        try {
          return fn();
        } finally {
          active = before;
        }
      });
    }) as api.ContextManager['with'],
    bind: (_ctx, target) => target,
    enable() {
      return this;
    },
    disable() {
      return this;
    },
  };
}

const install = (m: api.ContextManager) => {
  api.context.disable();
  api.context.setGlobalContextManager(m);
};
afterEach(() => disableOtelGlobals());

/** A call's outcome as a promise: a throw at once (the handler's, as handlerWork takes it) as a rejection. */
const settled = <T>(call: () => Promise<T>): Promise<T> => new Promise<T>((resolve) => resolve(call()));

/** Runs a handler that records the context it ran in; returns its calls and the outcome. */
async function run(work: () => Promise<string> = async () => 'done') {
  const seen: unknown[] = [];
  const outcome = await runInContext(api, context, () => {
    seen.push(api.context.active().getValue(KEY));
    return work();
  }).then(
    (value) => ({ value }),
    (error: unknown) => ({ error: (error as Error).message }),
  );
  return { seen, outcome };
}

describe('runInContext', () => {
  it('a working manager: once, inside the context, its outcome', async () => {
    install(manager((call) => call()));
    expect(await run()).toEqual({ seen: ['inside'], outcome: { value: 'done' } });
  });

  it('a manager that throws before the call: once, outside the context, its outcome', async () => {
    install(
      manager(() => {
        throw new Error('broken before');
      }),
    );
    expect(await run()).toEqual({ seen: [undefined], outcome: { value: 'done' } });
  });

  it('a manager that throws after the call: once, its outcome stands', async () => {
    install(
      manager((call) => {
        call();
        throw new Error('broken after');
      }),
    );
    expect(await run()).toEqual({ seen: ['inside'], outcome: { value: 'done' } });
  });

  it('a manager that returns without calling it: run once all the same, its outcome (not "nothing failed")', async () => {
    install(manager(() => undefined));
    expect(await run()).toEqual({ seen: [undefined], outcome: { value: 'done' } });
  });

  it("a manager that returns something else than the call gave: the handler's own promise", async () => {
    install(
      manager((call) => {
        call();
        return 'not the promise';
      }),
    );
    expect(await run()).toEqual({ seen: ['inside'], outcome: { value: 'done' } });
  });

  it('a handler that throws at once: its own error, even when the manager throws another while unwinding', async () => {
    const work = () => {
      throw new Error('the handler failed');
    };
    install(manager((call) => call()));
    await expect(settled(() => runInContext(api, context, work))).rejects.toThrow('the handler failed');
    install(
      manager((call) => {
        try {
          return call();
        } finally {
          // eslint-disable-next-line no-unsafe-finally
          throw new Error('broken while unwinding');
        }
      }),
    );
    let calls = 0;
    await expect(
      settled(() =>
        runInContext(api, context, () => {
          calls++;
          return work();
        }),
      ),
    ).rejects.toThrow('the handler failed');
    expect(calls).toBe(1);
  });
});
