/** The demo handler's behaviour (DemoBehaviour). */
export const DEMO = Symbol('DEMO');
/** The Redis URL the worker was given. */
export const REDIS_URL = Symbol('REDIS_URL');
