import { execFileSync } from 'node:child_process';

/** From an exit handler (synchronous): SHUTDOWN NOSAVE to a bench's own server, so a run that failed midway leaves none behind. */
export function shutdownRedis(port: number): void {
  try {
    execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'shutdown', 'nosave'], { stdio: 'ignore', timeout: 2000 });
  } catch {
    // Already gone.
  }
}
