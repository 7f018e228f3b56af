import type { HealthThresholds } from 'nestjs-redis-streams';

/** The worker's health and metrics listener: where it listens, and the thresholds of its checks. */
export interface HealthConfig {
  /** HEALTH_PORT (1–65535). */
  port: number;
  /** HEALTH_HOST; loopback (127.0.0.1) unless set. */
  host: string;
  /**
   * HEALTH_REDIS_DOWN_MS (readiness: down once Redis has been unreachable this long; the library's
   * default, 30 s, when unset), HEALTH_MAX_LAG and HEALTH_MAX_PENDING (readiness: down while a
   * stream's lag or pending count is above them; not checked when unset).
   */
  thresholds: HealthThresholds;
}

/**
 * Reads the health listener's settings from the environment. Undefined without HEALTH_PORT: the
 * worker then opens no port. The thresholds are checked either way, so a typo is never silent.
 */
export function healthConfig(env: NodeJS.ProcessEnv = process.env): HealthConfig | undefined {
  const whole = (name: string, min: number, max: number): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return undefined;
    const value = Number(raw);
    if (!/^\s*\d+\s*$/.test(raw) || !Number.isSafeInteger(value) || value < min || value > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `a whole number (${min} or more)` : `an integer from ${min} to ${max}`;
      throw new Error(`${name} must be ${range}, got ${JSON.stringify(raw)}`);
    }
    return value;
  };
  const thresholds: HealthThresholds = {};
  const redisDownMs = whole('HEALTH_REDIS_DOWN_MS', 0, Number.MAX_SAFE_INTEGER);
  const maxLag = whole('HEALTH_MAX_LAG', 0, Number.MAX_SAFE_INTEGER);
  const maxPending = whole('HEALTH_MAX_PENDING', 0, Number.MAX_SAFE_INTEGER);
  if (redisDownMs !== undefined) thresholds.redisDownMs = redisDownMs;
  if (maxLag !== undefined) thresholds.maxLag = maxLag;
  if (maxPending !== undefined) thresholds.maxPending = maxPending;
  const port = whole('HEALTH_PORT', 1, 65_535);
  const host = env.HEALTH_HOST?.trim() || '127.0.0.1';
  if (port === undefined) return undefined;
  return { port, host, thresholds };
}

/** `http://host:port` of the listener, with an IPv6 host in brackets. */
export function healthBaseUrl({ host, port }: Pick<HealthConfig, 'host' | 'port'>): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}
