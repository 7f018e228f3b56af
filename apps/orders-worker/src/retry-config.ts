import { MAX_RETRY_DELAY_MS, type RetryPolicy } from 'nestjs-redis-streams';

const FORMAT = /^(fixed|exponential):(\d+)(?::(\d+))?$/;

/**
 * STREAMS_RETRY: the server's `retry` policy, `fixed:<ms>` or `exponential:<ms>[:<maxMs>]`
 * (`delayMs`, `maxDelayMs`). Undefined when unset or empty: no policy, a failed order comes back
 * once idle (the transport's default). Anything else is refused here, naming the setting, rather
 * than as an option of the transport the operator never wrote.
 */
export function retryPolicy(raw: string | undefined): RetryPolicy | undefined {
  if (raw === undefined || raw.trim() === '') return undefined;
  const match = FORMAT.exec(raw.trim());
  const [, type, delay, max] = match ?? [];
  const delayMs = Number(delay);
  const maxDelayMs = max === undefined ? undefined : Number(max);
  const fits = (ms: number | undefined) => ms === undefined || ms <= MAX_RETRY_DELAY_MS;
  // `fixed` takes no maximum; one below the first delay the transport would refuse too, naming its own option.
  const valid =
    match && fits(delayMs) && fits(maxDelayMs) && (maxDelayMs === undefined || (type === 'exponential' && maxDelayMs >= delayMs));
  if (!valid) {
    throw new Error(
      `STREAMS_RETRY must be fixed:<ms> or exponential:<ms>[:<maxMs>] (whole ms up to ${MAX_RETRY_DELAY_MS}, maxMs at least ms), got ${JSON.stringify(raw)}`,
    );
  }
  const backoff = { type: type as 'fixed' | 'exponential', delayMs, ...(maxDelayMs === undefined ? {} : { maxDelayMs }) };
  return { backoff };
}
