/** Simulated work per order, in ms (DEMO_WORK_MS). */
export const WORK_MS = Symbol('WORK_MS');
