import type { CloseInterrupt } from '../engine/shutdown.js';

const ABORTED = 'aborted';

/**
 * A consumer's `signal`: aborted before `close()`, it closes the consumer; aborted while
 * `close()` waits on handlers, it ends that wait (what is in hand stays pending), as a second
 * SIGTERM does for a Nest app. The process' signals stay the caller's.
 */
export class AbortWatch {
  private closeStarted = false;
  private interruptedBy: string | undefined;
  private interruptNow: ((why: string) => void) | undefined;

  constructor(
    private readonly signal: AbortSignal | undefined,
    private readonly close: () => Promise<void>,
  ) {
    signal?.addEventListener('abort', this.aborted, { once: true });
  }

  /** Already aborted when the consumer starts: it closes at once. */
  get abortedAlready(): boolean {
    return this.signal?.aborted === true;
  }

  /** close() began (called by the app or by the abort). */
  closing(): void {
    this.closeStarted = true;
  }

  /** Nothing more to watch once close() ended. */
  dispose(): void {
    this.signal?.removeEventListener('abort', this.aborted);
  }

  readonly interrupt: CloseInterrupt = () => ({
    interrupted: new Promise<string>((resolve) => {
      if (this.interruptedBy) resolve(this.interruptedBy);
      else this.interruptNow = resolve;
    }),
    dispose: () => (this.interruptNow = undefined),
  });

  private readonly aborted = (): void => {
    if (!this.closeStarted) {
      void this.close();
      return;
    }
    this.interruptedBy = ABORTED;
    this.interruptNow?.(ABORTED);
  };
}
