import { hostname, userInfo } from 'node:os';
import { escapeControl as e, safeJson } from '../escape-control.js';
import type { RedisConnection } from '../redis/connection/connect.js';
import { PauseCommands } from '../redis/intake/pause-commands.js';
import { isNoPermission, isNoSuchKey, isWrongType } from '../redis/replies/redis-errors.js';
import { ReportCommands } from '../redis/tools/report-commands.js';
import { UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';

export const PAUSE_USAGE = `pause  <name> --group G [--force] [--json]
  resume <name> --group G [--json]`;

export const PAUSE_HELP = `pause: pauses streams for a whole group at run time. <name> is a stream as inspect shows it (that
stream alone), or, when no stream has that name, a partitioned pattern's name with the key prefix
(app:orders: each of its partitions app:{orders:0} …). It prints every stream it paused. Every worker
of the group finishes what it holds and starts nothing new of them within flowCheckMs (1 s by default);
workers started meanwhile stay paused; all stay live and ready (a pause is no fault: an orchestrator
must not restart them). A name no stream with a consumer group has, or a group it does not have, is
refused unless --force (a typo would pause nothing, or a group created later); --force pauses what
<name> denotes without checking its group (a partitioned pattern's partitions when it may SCAN; else
the stream <name> as named, and says that no partition is paused). resume: undoes it (the same streams); workers read again
within flowCheckMs. Each stream's flag is the key <stream>:paused:<group>, its value who paused it and
when (shown by inspect). Rights: +set +del +get on the flags; to check the name, +xinfo|groups on the
stream, and +scan (and +xinfo|groups on what it finds) for a partitioned pattern's name.`;

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
  // Resuming looks for what a pause may have named; a name that is no stream's resumes its partitions' flags.
  const streams = values.force ? await forcedStreams(redis, name, io) : await streamsNamed(redis, name, group, sub === 'pause', io);
  if (sub === 'resume') {
    const resumed = await Promise.all(streams.map((s) => pauses.resume(s, group)));
    if (values.json) io.out(safeJson({ name, group, streams, resumed: streams.filter((_, i) => resumed[i]) }));
    else
      streams.forEach((s, i) =>
        io.out(
          resumed[i]
            ? `resumed "${e(s)}" for group "${e(group)}": its workers read again within flowCheckMs`
            : `"${e(s)}" was not paused for group "${e(group)}"`,
        ),
      );
    return 0;
  }
  const by = operator();
  const paused: string[] = [];
  const already: { stream: string; since?: number; by?: string }[] = [];
  for (const stream of streams) {
    if (await pauses.pause(stream, group, by)) paused.push(stream);
    else {
      const state = await pauses.state(stream, group);
      already.push({ stream, ...(state?.at ? { since: state.at } : {}), ...(state?.by ? { by: state.by } : {}) });
    }
  }
  if (values.json) io.out(safeJson({ name, group, streams, paused, alreadyPaused: already }));
  else {
    for (const stream of paused)
      io.out(`paused "${e(stream)}" for group "${e(group)}": its workers finish what they hold and read nothing new within flowCheckMs`);
    for (const a of already)
      io.out(
        `"${e(a.stream)}" was already paused for group "${e(group)}"${a.since ? ` since ${new Date(a.since).toISOString()}` : ''}${a.by ? ` by ${e(a.by)}` : ''}`,
      );
  }
  return 0;
}

/** `app:{orders:3}` → `app:orders`, the name of the partitioned pattern it would be a partition of; undefined for any other key. */
function patternNameOf(stream: string): string | undefined {
  const m = /^(.*)\{(.+):\d+\}$/s.exec(stream);
  return m ? `${m[1]}${m[2]}` : undefined;
}

/** The partitions of a partitioned pattern named `name` (SCAN … TYPE stream); undefined when the ACL refuses SCAN. */
async function partitionsNamed(reports: ReportCommands, name: string): Promise<string[] | undefined> {
  try {
    // Keys shaped like partitions: only those of this name are looked at, so an ACL may scope the rest out.
    return [...(await reports.streamKeys('*{*:[0-9]*}')).keys()].filter((s) => patternNameOf(s) === name).sort();
  } catch (err) {
    if (isNoPermission(err)) return undefined;
    throw err;
  }
}

const NO_SCAN = (name: string) =>
  `could not look for partitions of a pattern "${e(name)}" (SCAN refused: the user needs +scan for a partitioned pattern's name)`;

/** --force: the partitions of a pattern of that name when there are any (and SCAN is allowed), else the name as it is. */
async function forcedStreams(redis: RedisConnection, name: string, io: CliIo): Promise<string[]> {
  const reports = new ReportCommands(redis);
  const isStream = await reports.groups(name).then(
    () => true,
    () => false,
  );
  if (isStream) return [name];
  const partitions = await partitionsNamed(reports, name);
  if (partitions === undefined)
    io.err(`${NO_SCAN(name)}: "${e(name)}" is paused as named, which pauses no partition (such as ${e(partitionExample(name))})`);
  return partitions && partitions.length > 0 ? partitions : [name];
}

/** `app:orders` → `app:{orders:0}`, the first partition a pattern of that name would have. */
function partitionExample(name: string): string {
  const at = name.lastIndexOf(':');
  return `${name.slice(0, at + 1)}{${name.slice(at + 1)}:0}`;
}

/**
 * The streams `name` denotes: itself when it is a stream with a consumer group; else the partitions of
 * a partitioned pattern of that name (found by SCAN). None, or none with `group`: a typo would pause
 * nothing now, and a group of that name created later: refused (`strict`, a pause; a resume says so).
 */
async function streamsNamed(redis: RedisConnection, name: string, group: string, strict: boolean, io: CliIo): Promise<string[]> {
  const reports = new ReportCommands(redis);
  const groupsOf = (stream: string) =>
    reports.groups(stream).then(
      (groups) => groups.map((g) => g.name),
      (err: unknown) => {
        if (isNoSuchKey(err) || isWrongType(err)) return [];
        throw err;
      },
    );
  let groups: string[] = await groupsOf(name);
  let streams = [name];
  if (groups.length === 0) {
    const partitions = await partitionsNamed(reports, name);
    if (partitions === undefined) {
      // Not a stream with a group, and no way to look for partitions: say what is missing, not Redis' NOPERM.
      if (!strict) {
        io.err(`${NO_SCAN(name)}: resuming "${e(name)}" as named`);
        return [name];
      }
      throw new UsageError(`no stream with a consumer group is named "${e(name)}", and ${NO_SCAN(name)}; --force pauses it as named`);
    }
    const groupsEach = await Promise.all(partitions.map(groupsOf));
    streams = partitions.filter((_, i) => groupsEach[i]!.length > 0);
    groups = [...new Set(groupsEach.flat())];
  }
  if (streams.length === 0) {
    if (!strict) return [name];
    throw new UsageError(
      `no stream with a consumer group is named "${e(name)}" (a stream as inspect shows it, or a partitioned pattern's name such as app:orders for app:{orders:0}); --force pauses it all the same`,
    );
  }
  if (strict && !groups.includes(group))
    throw new UsageError(
      `"${e(name)}" has no group "${e(group)}" (its groups: ${groups.map((g) => `"${e(g)}"`).join(', ')}); --force pauses it all the same`,
    );
  return streams;
}
