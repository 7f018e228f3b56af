import { hostname, userInfo } from 'node:os';
import { escapeControl as e, safeJson } from '../escape-control.js';
import { findStreams } from '../ops/stream-reports.js';
import type { RedisConnection } from '../redis/connect.js';
import { PauseCommands, pauseNameOf } from '../redis/pause-commands.js';
import { ReportCommands } from '../redis/report-commands.js';
import { UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';

export const PAUSE_USAGE = `pause  <name> --group G [--force] [--json]
  resume <name> --group G [--json]`;

export const PAUSE_HELP = `pause: pauses a pattern for a whole group at run time. <name> is its stream as inspect shows it, or
for a partitioned pattern its name with the key prefix (app:orders for app:{orders:0} …). Every worker
of the group finishes what it holds and reads nothing new of it within flowCheckMs (1 s by default);
workers started meanwhile stay paused; all stay live and ready (a pause is no fault: an orchestrator
must not restart them). A name no stream with a consumer group has, or a group it does not have, is refused
unless --force (a typo would pause nothing, or a group created later). resume: undoes it; workers read again within flowCheckMs. The flag is the key
<name>:paused:<group>, its value who paused it and when (shown by inspect).`;

type PauseFlags = { group?: string; force: boolean; json: boolean };

/** Who an operator's pause names: this user on this host. */
function operator(): string {
  let user = 'unknown';
  try {
    user = userInfo().username;
  } catch {
    // No passwd entry (a container's arbitrary uid): the host alone.
  }
  return `cli ${user}@${hostname()}`;
}

/** `pause | resume <name> --group G`; returns the exit code. */
export async function runPause(
  redis: RedisConnection,
  sub: 'pause' | 'resume',
  name: string,
  values: PauseFlags,
  io: CliIo,
): Promise<number> {
  const group = values.group!;
  const pauses = new PauseCommands(redis);
  if (sub === 'resume') {
    const resumed = await pauses.resume(name, group);
    if (values.json) io.out(safeJson({ name, group, resumed }));
    else
      io.out(
        resumed
          ? `resumed "${e(name)}" for group "${e(group)}": its workers read again within flowCheckMs`
          : `"${e(name)}" was not paused for group "${e(group)}"`,
      );
    return 0;
  }
  if (!values.force) await refuseUnknown(redis, name, group);
  const paused = await pauses.pause(name, group, operator());
  const state = paused ? undefined : await pauses.state(name, group);
  if (values.json) io.out(safeJson({ name, group, paused, ...(state ? { since: state.at, by: state.by } : {}) }));
  else if (paused)
    io.out(`paused "${e(name)}" for group "${e(group)}": its workers finish what they hold and read nothing new within flowCheckMs`);
  else
    io.out(
      `"${e(name)}" was already paused for group "${e(group)}"${state?.at ? ` since ${new Date(state.at).toISOString()}` : ''}${state?.by ? ` by ${e(state.by)}` : ''}`,
    );
  return 0;
}

/** A name no stream with a group has, or a group none of its streams has, pauses nothing now (a typo) and a group created later: refused. */
async function refuseUnknown(redis: RedisConnection, name: string, group: string): Promise<void> {
  const streams = (await findStreams(redis, '*')).filter((stream) => pauseNameOf(stream) === pauseNameOf(name));
  if (streams.length === 0)
    throw new UsageError(
      `no stream with a consumer group is named "${e(name)}" (a stream as inspect shows it, or a partitioned pattern's name such as app:orders for app:{orders:0}); --force pauses it all the same`,
    );
  const reports = new ReportCommands(redis);
  const groups = new Set((await Promise.all(streams.map((s) => reports.groups(s)))).flat().map((g) => g.name));
  if (!groups.has(group))
    throw new UsageError(
      `"${e(name)}" has no group "${e(group)}" (its groups: ${[...groups].map((g) => `"${e(g)}"`).join(', ')}); --force pauses it all the same`,
    );
}
