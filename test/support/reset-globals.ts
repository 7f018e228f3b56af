import { failOnLeftovers } from './leftovers.js';
import { logFileCpu } from './file-cpu.js';
import { disableOtelGlobals } from './otel.js';

// Test files share a worker's module cache (isolate: false): each starts with no OpenTelemetry
// globals, whatever the file before it registered.
disableOtelGlobals();

// Registered first, so its afterAll runs last: the file's whole CPU, its own hooks' and the check below included.
logFileCpu();

// Registered before the file's own hooks, so it runs after them (Vitest runs after-hooks as a stack).
failOnLeftovers();
