import { describeError } from '../describe-error.js';
import { redactError } from '../redact.js';

export interface StartupGateOptions {
  startupTimeoutMs: number;
  /** The masked connection URL, named in the errors. */
  where: string;
  /** What no error handed over may carry (passwords). */
  secrets: readonly string[];
  /** Readers that must have their groups before the gate opens. */
  readers: number;
  /** Whether a connection is down now: then its error, not the loop's, is the cause. */
  connectionsDown: () => boolean;
  /** The deadline passed: the start failed with this error (the engine closes). */
  onTimeout: (error: Error) => void;
}

/**
 * Until the first start, `start()` must answer: with an error for what needs a human (bad
 * password, missing ACL right, WRONGTYPE key, an old server) at once, and for what may heal
 * (Redis unreachable) after `startupTimeoutMs`. Once started, the loops retry forever. Every
 * error handed over is scrubbed (ioredis' carry the handshake's AUTH arguments), with the masked URL.
 */
export class StartupGate {
  /** Resolves when every reader is ready; never rejects (the loops wait on it). */
  readonly opened: Promise<void>;
  /** Resolves when the gate opens, rejects with the start's failure. */
  readonly outcome: Promise<void>;
  private open!: () => void;
  private refuse!: (error: unknown) => void;
  private state: 'pending' | 'open' | 'failed' = 'pending';
  private readonly ready = new Set<unknown>();
  private laneError: unknown;
  private loopError: unknown;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly o: StartupGateOptions) {
    let opened!: () => void;
    this.opened = new Promise<void>((resolve) => (opened = resolve));
    this.outcome = new Promise<void>((resolve, reject) => {
      this.open = () => {
        resolve();
        opened();
      };
      this.refuse = reject;
    });
    this.timer = setTimeout(() => this.timedOut(), o.startupTimeoutMs);
  }

  /** Still starting: a failure now fails the start. */
  get pending(): boolean {
    return this.state === 'pending';
  }

  get isOpen(): boolean {
    return this.state === 'open';
  }

  laneFailed(error: unknown): void {
    this.laneError = error;
  }

  loopFailed(error: unknown): void {
    this.loopError = error;
  }

  /** Fails the start with `error`; false when it was over already (started, or failed before). */
  fail(error: unknown): boolean {
    if (this.state !== 'pending') return false;
    this.state = 'failed';
    clearTimeout(this.timer);
    const { where, secrets } = this.o;
    this.refuse(redactError(error, describeError(error).includes(where) ? undefined : where, secrets));
    return true;
  }

  /** `reader` has its groups; true when that opened the gate (the last one). */
  readerReady(reader: unknown): boolean {
    this.ready.add(reader);
    if (this.state !== 'pending' || this.ready.size < this.o.readers) return false;
    this.state = 'open';
    clearTimeout(this.timer);
    this.open();
    return true;
  }

  private timedOut(): void {
    // While a connection is down, its error is the cause (the loop's own only says it gave up waiting).
    const cause = this.o.connectionsDown() ? (this.laneError ?? this.loopError) : (this.loopError ?? this.laneError);
    const { startupTimeoutMs, where } = this.o;
    this.o.onTimeout(
      new Error(
        `nestjs-redis-streams: could not start within ${startupTimeoutMs} ms: ${where} unreachable: ${cause === undefined ? 'no answer' : describeError(cause)}`,
        { cause },
      ),
    );
  }
}
