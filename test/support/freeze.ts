import type { Redis } from 'ioredis';

/**
 * Freezes the server behind `admin` (SIGSTOP to its process: connections stay open, nothing is
 * answered), for tests of a Redis that does not answer. Returns the thaw (SIGCONT), safe to call twice.
 */
export async function freezeServer(admin: Redis): Promise<() => void> {
  const info = await admin.info('server');
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error('freezeServer: no process_id in INFO server');
  process.kill(pid, 'SIGSTOP');
  let thawed = false;
  return () => {
    if (thawed) return;
    thawed = true;
    process.kill(pid, 'SIGCONT');
  };
}
