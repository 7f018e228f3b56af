/** The demo handler's behaviour (DemoBehaviour). */
export const DEMO = Symbol('DEMO');
/** Where Redis is: the worker's `connection` (a redis:// URL, or the node URLs of a cluster). */
export const REDIS_CONNECTION = Symbol('REDIS_CONNECTION');
