import { disableOtelGlobals } from './otel.js';

// Test files share a worker's module cache (isolate: false): each starts with no OpenTelemetry
// globals, whatever the file before it registered.
disableOtelGlobals();
