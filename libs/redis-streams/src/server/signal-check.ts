import type { LoggerService } from '@nestjs/common';

/** Said once per process, however many servers it starts. */
let told = false;

/**
 * Warns once when nothing in the process listens for SIGTERM as the transport starts. Then the signal
 * an orchestrator sends (Kubernetes, `docker stop`) kills the process at once, exit code 143: the entry
 * in hand is abandoned mid-handler (it stays pending and runs again elsewhere) instead of finishing and
 * being acked. Nest listens for it once `app.enableShutdownHooks()` was called. Checked on the turn
 * after `listen()`, so that a hybrid app enabling them between `startAllMicroservices()` and its HTTP
 * `listen()` is not warned. Not said under a test runner (NODE_ENV=test: Jest and Vitest set it), where
 * no signal comes.
 */
export function warnIfSigtermUnhandled(logger: LoggerService): void {
  if (told || process.env.NODE_ENV === 'test') return;
  setImmediate(() => {
    if (told || process.listenerCount('SIGTERM') > 0) return;
    told = true;
    logger.warn(
      'nothing handles SIGTERM: a stop (Kubernetes, docker stop) would kill this process mid-entry (exit 143) instead of ' +
        "finishing the entry in hand: call app.enableShutdownHooks(['SIGTERM', 'SIGINT']) (or, without a Nest app, call the server's close() on SIGTERM)",
    );
  }).unref();
}
