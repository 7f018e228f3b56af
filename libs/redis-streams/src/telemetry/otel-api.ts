/** `@opentelemetry/api`, the only OpenTelemetry package this one touches (an optional peer). */
export type OtelApi = typeof import('@opentelemetry/api');

let loading: Promise<OtelApi | undefined> | undefined;

/**
 * The app's `@opentelemetry/api`, or undefined when it is not installed: loaded once, on first
 * use, so an app without it never pays for it. Every copy of the API shares one global registry,
 * so the SDK the app registered is the one this finds.
 */
export function loadOtelApi(): Promise<OtelApi | undefined> {
  return (loading ??= import('@opentelemetry/api').then(
    (api) => api,
    () => undefined,
  ));
}
