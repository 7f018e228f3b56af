// node --import <this file>: `@opentelemetry/api` cannot be resolved, as in an app that does not
// install it. The telemetry bench compares the transport's drain with and without the API present.
import { register } from 'node:module';

const hook = `export async function resolve(specifier, context, next) {
  if (specifier === '@opentelemetry/api' || specifier.startsWith('@opentelemetry/api/')) {
    const error = new Error("Cannot find package '@opentelemetry/api' (hidden by bench/hide-otel-api.mjs)");
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hook)}`);
