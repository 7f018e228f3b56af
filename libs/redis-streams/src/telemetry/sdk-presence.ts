import type { MeterProvider } from '@opentelemetry/api';
import type { OtelApi } from './otel-api.js';
import { safely } from './safely.js';
import { SCOPE } from './semconv.js';

/** An SDK registered after the transport started is noticed within this long. */
const RECHECK_MS = 1000;

/**
 * Whether the app registered an OpenTelemetry SDK: a tracer provider other than the API's no-op,
 * a meter provider other than its no-op. Without one, the transport skips every per-entry step
 * (no span, no context switch, no measurement): with the API installed and no SDK the cost must be
 * nil, and even no-op spans cost about a microsecond per entry. Looked up at most once a second.
 */
export class SdkPresence {
  /** Set again by a timer RECHECK_MS after each look: the hot path reads a flag, not a clock. */
  private stale = true;
  private tracingOn = false;
  private meters: MeterProvider | undefined;
  /** The API's own no-op tracer provider (what an unset global delegates to). */
  private readonly noopTracerProvider: unknown;

  constructor(private readonly api: OtelApi) {
    this.noopTracerProvider = new api.ProxyTracerProvider().getDelegate();
  }

  get tracing(): boolean {
    this.refresh();
    return this.tracingOn;
  }

  /** The app's meter provider; undefined while it is the API's no-op. Instruments made before an SDK was registered stay no-ops: callers re-make theirs when this changes. */
  get meterProvider(): MeterProvider | undefined {
    this.refresh();
    return this.meters;
  }

  /** The meter provider as of the last look (no check): right after `tracing`, current. */
  get lastMeterProvider(): MeterProvider | undefined {
    return this.meters;
  }

  private refresh(): void {
    if (!this.stale) return;
    this.stale = false;
    // Unref'd: it never keeps the process alive, and needs no clearing. A host whose timers are
    // plain numbers (a test environment's fakes) has no unref: the timer then simply runs.
    (setTimeout(() => (this.stale = true), RECHECK_MS) as { unref?: () => unknown }).unref?.();
    const { api } = this;
    this.tracingOn = safely(
      api,
      'tracer provider',
      () => {
        const provider = api.trace.getTracerProvider();
        return (provider instanceof api.ProxyTracerProvider ? provider.getDelegate() : provider) !== this.noopTracerProvider;
      },
      false,
    );
    this.meters = safely(
      api,
      'meter provider',
      () => {
        const meters = api.metrics.getMeterProvider();
        return meters.getMeter(SCOPE) !== api.createNoopMeter() ? meters : undefined;
      },
      undefined,
    );
  }
}
