// The `redis-streams` command (bin: redis-streams.ts): what an operator needs beside the workers.
import type { Cluster } from 'ioredis';
import { parseArgs } from 'node:util';
import { DeadLetters } from '../dlq/dead-letters.js';
import { pruneLockOf } from '../key-names.js';
import { StreamCommands } from '../redis/stream-commands.js';
import { escapeControl, safeJson } from '../escape-control.js';
import { randomUUID } from 'node:crypto';
import { CONNECTION_FLAGS, CONNECTION_HELP, connect, MAX_TIMER_MS, positiveFlag, UsageError, withConnection } from './cli-connection.js';
import type { CliIo } from './cli-io.js';
import { DLQ_COMMANDS, DLQ_FLAGS, DLQ_NAMING, DLQ_USAGE, checkDlqArgs, runDlq } from './dlq-command.js';
import { PENDING_HELP, PENDING_USAGE, requirePendingArgs, runPending } from './pending-command.js';
import { attention } from '../ops/attention.js';
import { DASHBOARD_FLAGS, DASHBOARD_HELP, DASHBOARD_USAGE, dashboardSettings, runDashboard } from './dashboard-command.js';
import { findStreams, inspectStreams, serverLine, type StreamReport } from '../ops/stream-reports.js';
import { rates, renderReports } from './inspect.js';
import { counted } from '../readable.js';
import { PAUSE_HELP, PAUSE_USAGE, runPause } from './pause-command.js';
import { runSchedules, scheduleSpecOf, SCHEDULES_FLAGS, SCHEDULES_HELP, SCHEDULES_USAGE } from './schedules-command.js';

const INSPECT_HELP = `inspect: the server and which newer stream commands it offers; per stream its length, dead letters,
its idempotent writes' counters and window (Redis 8.6) and, per group, lag, pending and last delivered id;
per consumer its pending count, idle time and the age of its oldest pending entry, then its --entries
oldest pending entries (default 10), each with what it waits for: "waiting for its retry in …"
(a record in the retry set, due later), "retry due … ago", "in a live handler" (its consumer has a
connection open), "consumer gone" (none: a peer's reclaim takes it once idle past minIdleMs), or
"retry state unknown" (the retry set could not be read, e.g. NOPERM). Without stream
names, every stream matching --match (default *) that has a consumer group. --watch refreshes in
place every --interval ms (default 2000) with entries/s produced and consumed. Each stream's
"attention:" lines (\`attention\` in --json) flag a pending entry idle past --min-idle-ms (default
30000, the server's minIdleMs default) that nobody reclaimed, a consumer with no connection that owns
entries (or entries waiting for their retry), a retry due longer than --min-idle-ms ago under a live
consumer, a retry set that could not be read, dead letters, a dead-letter key that holds another type,
and, when watching, a dead-letter stream that grew and a lag that rose.`;

const PRUNE_HELP = `consumers prune: deletes the group's consumers idle for --idle-ms or more that own no pending entry
and have no connection open (a live parked worker looks idle for minutes on Redis 7.0).`;

/** Each command: its usage lines and what it does. */
const COMMANDS: Record<string, { usage: string; help: string }> = {
  inspect: {
    usage:
      'redis-streams inspect [<stream> …] [--match PATTERN] [--group G] [--min-idle-ms MS] [--entries N] [--json] [--watch [--interval MS] [--times N]]',
    help: INSPECT_HELP,
  },
  dlq: { usage: `redis-streams dlq ${DLQ_USAGE.replaceAll('\n  ', '\n  redis-streams dlq ')}`, help: DLQ_NAMING },
  consumers: { usage: 'redis-streams consumers prune <stream> --group G --idle-ms MS [--json]', help: PRUNE_HELP },
  pending: { usage: `redis-streams pending ${PENDING_USAGE.replaceAll('\n  ', '\n  redis-streams pending ')}`, help: PENDING_HELP },
  dashboard: { usage: `redis-streams ${DASHBOARD_USAGE}`, help: DASHBOARD_HELP },
  pause: { usage: `redis-streams ${PAUSE_USAGE.replaceAll('\n  ', '\n  redis-streams ')}`, help: PAUSE_HELP },
  schedules: { usage: `redis-streams ${SCHEDULES_USAGE.replaceAll('\n  ', '\n  redis-streams ')}`, help: SCHEDULES_HELP },
};

const WHERE = '(each with [--url redis://…] or [--cluster redis://…,…])';
const usageLines = (names: string[]) => `usage:\n  ${names.map((n) => COMMANDS[n]!.usage).join('\n  ')}\n  ${WHERE}`;

/** `--help`: every command's usage and what each does. */
export const REDIS_STREAMS_USAGE = `${usageLines(Object.keys(COMMANDS))}

${Object.values(COMMANDS)
  .map((c) => c.help)
  .join('\n\n')}

${CONNECTION_HELP}`;

/** What a usage error without a known command prints after it: the usage lines, and where the rest is. */
export const REDIS_STREAMS_SHORT_USAGE = `${usageLines(Object.keys(COMMANDS))}
redis-streams <command> --help says what a command does; redis-streams --help, all of them.`;

/** One command's usage, after a usage error of that command. */
const commandUsage = (command: string) => `${usageLines([command])}\nredis-streams ${command} --help says more.`;

/** `<command> --help`. */
const commandHelp = (command: string) => `${usageLines([command])}\n\n${COMMANDS[command]!.help}\n\n${CONNECTION_HELP}`;

const fail = (message: string): never => {
  throw new UsageError(message);
};

/** Most pending entries `--entries` lists per consumer: one XPENDING each, and their ids in ZMSCORE. */
const MAX_ENTRIES_SHOWN = 1000;

type Flags = ReturnType<typeof parseFlags>['values'];

const parseFlagsOptions = {
  ...CONNECTION_FLAGS,
  ...DLQ_FLAGS,
  ...DASHBOARD_FLAGS,
  ...SCHEDULES_FLAGS,
  match: { type: 'string', default: '*' },
  group: { type: 'string' },
  watch: { type: 'boolean', default: false },
  interval: { type: 'string', default: '2000' },
  times: { type: 'string' },
  'idle-ms': { type: 'string' },
  'min-idle-ms': { type: 'string', default: '30000' },
  entries: { type: 'string', default: '10' },
  force: { type: 'boolean', default: false },
} as const;

function parseFlags(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, options: parseFlagsOptions });
}

/** The command `argv` names, read leniently (a bad flag must not hide which command's usage to show). */
function commandOf(argv: string[]): string | undefined {
  const [command] = parseArgs({ args: argv, allowPositionals: true, strict: false, options: parseFlagsOptions }).positionals;
  if (command === 'resume') return 'pause';
  return command !== undefined && command in COMMANDS ? command : undefined;
}

export async function redisStreamsMain(argv: string[], io: CliIo): Promise<number> {
  try {
    return await runRedisStreams(argv, io);
  } catch (err) {
    // A usage error shows the usage of the command it concerns, when there is one.
    const command = commandOf(argv);
    const parseError = (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true;
    if (command && (err instanceof UsageError || parseError)) (err as { usage?: string }).usage = commandUsage(command);
    throw err;
  }
}

async function runRedisStreams(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(argv);
  // `help <command>`, as git and npm take it, is `<command> --help`.
  const asked = positionals[0] === 'help';
  const [command, ...rest] = asked ? positionals.slice(1) : positionals;
  if (values.help || asked) {
    const named = command === 'resume' ? 'pause' : command;
    io.out(named !== undefined && named in COMMANDS ? commandHelp(named) : REDIS_STREAMS_USAGE);
    return 0;
  }
  if (!command) return fail('a command is needed');
  if (command === 'dlq') {
    const [sub, target, ...ids] = rest;
    if (!sub || !target || !DLQ_COMMANDS.includes(sub)) return fail(`dlq needs one of ${DLQ_COMMANDS.join(', ')} and a stream`);
    checkDlqArgs(sub, ids, values);
    return withConnection(values, (redis) => runDlq(redis, new DeadLetters(redis), sub, target, ids, values, io));
  }
  if (command === 'pending') {
    const [sub, stream, id, ...extra] = rest;
    requirePendingArgs(sub, stream, id, values.group);
    if (extra.length > 0) return fail(`pending ${sub} takes one entry id`);
    return withConnection(values, (redis) => runPending(redis, sub!, stream!, id!, values, io));
  }
  if (command === 'consumers') return prune(rest, values, io);
  if (command === 'pause' || command === 'resume') {
    const [name, ...extra] = rest;
    if (!name) return fail(`${command} needs a name (a stream, or a partitioned pattern's name)`);
    if (extra.length > 0) return fail(`${command} takes one name`);
    if (!values.group) return fail(`${command} needs --group G (a pause is one group's)`);
    return withConnection(values, (redis) => runPause(redis, command, name, values, io));
  }
  if (command === 'schedules') {
    const [sub, stream, id, ...extra] = rest;
    if (!sub || !['list', 'set', 'remove'].includes(sub) || !stream) return fail('schedules needs one of list, set, remove and a stream');
    if (sub !== 'list' && !id) return fail(`schedules ${sub} needs a stream and a schedule id`);
    if (extra.length > 0 || (sub === 'list' && id !== undefined))
      return fail(`schedules ${sub} takes ${sub === 'list' ? 'one stream' : 'a stream and one id'}`);
    // The spec's flags and JSON checked before connecting.
    const spec = sub === 'set' ? scheduleSpecOf(values) : undefined;
    return withConnection(values, (redis) => runSchedules(redis, sub, stream, id, spec, values, io));
  }
  if (command === 'inspect') return inspect(rest, values, io);
  if (command === 'dashboard') {
    if (rest.length > 0) return fail('dashboard takes no stream names (see --match)');
    // Its flags checked before it connects; the connection stays open while it serves (withRedis would close it).
    const settings = dashboardSettings(values);
    return runDashboard(await connect(values, { keepAlive: true }), settings, io);
  }
  return fail(`unknown command "${escapeControl(command)}"`);
}

/** `consumers prune <stream> --group G --idle-ms MS`. */
function prune(rest: string[], values: Flags, io: CliIo): Promise<number> {
  const [sub, stream] = rest;
  if (sub !== 'prune' || !stream) return fail('consumers prune needs a stream');
  const missing = [...(values.group ? [] : ['--group G']), ...(values['idle-ms'] === undefined ? ['--idle-ms MS'] : [])];
  if (missing.length > 0) return fail(`consumers prune needs ${missing.join(' and ')}`);
  const idleMs = positiveFlag('--idle-ms', values['idle-ms']);
  const group = values.group!;
  return withConnection(values, async (redis) => {
    // A lock of its own (a name nobody has, gone after 1 ms): an operator's prune does not wait
    // for the workers' interval, nor meets a key of the user's. Its own "self" is no consumer's name.
    const own = randomUUID();
    const lock = pruneLockOf(stream, own, (redis as Cluster).isCluster === true);
    const deleted = await new StreamCommands(redis, group).deleteIdleConsumers(stream, lock, own, idleMs, 1).catch((err: unknown) => {
      throw new Error(
        `"${stream}" group "${group}": ${err instanceof Error ? err.message.replace(/ script: \w+, on @user_script:\d+\.?$/, '') : String(err)}`,
        { cause: err },
      );
    });
    if (deleted === null) throw new Error(`could not take the prune lock "${lock}"`);
    if (values.json) io.out(safeJson(deleted));
    else
      io.out(
        deleted.length === 0
          ? `no consumer of "${escapeControl(group)}" on "${escapeControl(stream)}" idle past ${idleMs} ms with nothing pending`
          : `deleted ${deleted.length}: ${deleted.map(escapeControl).join(', ')}`,
      );
    return 0;
  });
}

/** `inspect [<stream> …]`, once or with `--watch`. */
function inspect(rest: string[], values: Flags, io: CliIo): Promise<number> {
  const intervalMs = positiveFlag('--interval', values.interval, MAX_TIMER_MS);
  const times = values.times === undefined ? (values.watch ? Infinity : 1) : positiveFlag('--times', values.times);
  const minIdleMs = positiveFlag('--min-idle-ms', values['min-idle-ms']);
  const entriesShown = positiveFlag('--entries', values.entries, MAX_ENTRIES_SHOWN);
  return withConnection(values, async (redis) => {
    let previous: { reports: StreamReport[]; at: number } | undefined;
    for (let i = 0; i < times; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, intervalMs)); // the refresh period of --watch
      // Found again every refresh: streams come and go while one watches.
      const streams = rest.length > 0 ? rest : await findStreams(redis, values.match);
      const at = Date.now();
      const reports = await inspectStreams(redis, streams, values.group, at, rest.length === 0, entriesShown);
      for (const report of reports)
        report.attention = attention(
          report,
          minIdleMs,
          previous?.reports.find((p) => p.stream === report.stream),
        );
      const r = previous ? rates(previous.reports, reports, (at - previous.at) / 1000) : undefined;
      previous = { reports, at };
      // Asked every refresh: a failover may land on another server. Not in plain --json, an array of reports.
      const server = values.json && !values.watch ? undefined : await serverLine(redis);
      printReports(io, values, intervalMs, at, reports, r, server);
    }
    return 0;
  });
}

function printReports(
  io: CliIo,
  values: Flags,
  intervalMs: number,
  at: number,
  reports: StreamReport[],
  r: ReturnType<typeof rates> | undefined,
  server: string | undefined,
): void {
  if (values.json) {
    const consumed = r && Object.fromEntries([...r.consumed].map(([stream, groups]) => [stream, Object.fromEntries(groups)]));
    const withRates = r ? { produced: Object.fromEntries(r.produced), consumed } : undefined;
    io.out(safeJson(values.watch ? { at, server, streams: reports, ...(withRates ? { rates: withRates } : {}) } : reports));
    return;
  }
  // In place, like top: clear the screen and draw again.
  if (values.watch && io.tty) io.raw('\x1b[2J\x1b[H');
  io.out(
    `${new Date(at).toISOString()}  ${counted(reports.length, 'stream', 'streams')}${values.watch ? `  (every ${intervalMs} ms, Ctrl-C to stop)` : ''}`,
  );
  io.out(`server: ${escapeControl(server ?? '')}`);
  io.out(renderReports(reports, r, values.group));
}
