/** The demo handler's behaviour (DemoBehaviour). */
export const DEMO = Symbol('DEMO');
/** Where Redis is: the worker's `connection` (a redis:// URL, or the node URLs of a cluster). */
export const REDIS_CONNECTION = Symbol('REDIS_CONNECTION');
/** The transport (RedisStreamsServer) the health checks read. */
export const STREAMS_SERVER = Symbol('STREAMS_SERVER');
/** The health checks' thresholds (HealthThresholds, from HEALTH_* settings). */
export const HEALTH_THRESHOLDS = Symbol('HEALTH_THRESHOLDS');
/** The OpenTelemetry Prometheus exporter that `/metrics` answers with. */
export const METRICS_EXPORTER = Symbol('METRICS_EXPORTER');
