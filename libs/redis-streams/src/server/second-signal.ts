import type { CloseInterrupt } from '../engine/shutdown.js';

const SIGNALS = ['SIGTERM', 'SIGINT'] as const;
type StopSignalName = (typeof SIGNALS)[number];

/**
 * The Nest adapter's {@link CloseInterrupt}: listens for SIGTERM/SIGINT while `close()` waits on
 * handlers: a second signal (Nest's shutdown hooks handle the first) ends the wait. Nest's own
 * listeners stay as they are. `dispose()` removes ours; when nobody else listened for the
 * signal, it is raised again then, so its default action (ending the process) is not swallowed.
 */
export const watchSignals: CloseInterrupt = () => {
  let received: StopSignalName | undefined;
  let alone = false;
  let resolve!: (signal: StopSignalName) => void;
  const interrupted = new Promise<StopSignalName>((r) => (resolve = r));
  const listeners = SIGNALS.map((signal) => {
    const listener = () => {
      if (received) return;
      received = signal;
      alone = process.listenerCount(signal) === 1;
      resolve(signal);
    };
    process.on(signal, listener);
    return [signal, listener] as const;
  });
  return {
    interrupted,
    dispose: () => {
      for (const [signal, listener] of listeners) process.removeListener(signal, listener);
      if (received && alone) process.kill(process.pid, received);
    },
  };
};
