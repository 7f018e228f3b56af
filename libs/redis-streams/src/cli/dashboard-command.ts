import type { RedisConnection } from '../redis/connection/connect.js';
import { resolveDashboardOptions } from '../dashboard/dashboard-options.js';
import { serveDashboard, type DashboardServerOptions } from '../dashboard/dashboard-server.js';
import { InvalidOptionError } from '../options/validate.js';
import { positiveFlag, UsageError } from './cli-connection.js';
import type { CliIo } from './cli-io.js';

export const DASHBOARD_USAGE =
  'dashboard [--port 3001] [--host 127.0.0.1] [--base-path /P] [--match PATTERN] [--min-idle-ms MS] [--actions] [--read-auth]';

export const DASHBOARD_HELP = `dashboard: a live page of every stream with a consumer group (lag, pending, consumers, rates, dead
letters; a stream's PEL, paged; an entry), on http://127.0.0.1:3001/ unless --host / --port say
otherwise. Read-only unless --actions: then redrive and delete of dead letters and pause and resume of a stream's
pattern for a group are on, and every
page asks for HTTP Basic auth with the password in $DASHBOARD_PASSWORD (required; never a flag, which
other users could read in the process list). Each action is logged on stdout (who, what, which ids).
--read-auth without --actions: read-only, and still every page asks for that password.
It answers only requests whose Host is one of its own addresses or an --allowed-host (a name a
proxy serves it under): a web page cannot rebind its own name to it and read it.`;

export const DASHBOARD_FLAGS = {
  port: { type: 'string', default: '3001' },
  host: { type: 'string', default: '127.0.0.1' },
  'base-path': { type: 'string' },
  actions: { type: 'boolean', default: false },
  'read-auth': { type: 'boolean', default: false },
  'allowed-host': { type: 'string', multiple: true },
} as const;

interface Flags {
  port: string;
  host: string;
  'base-path'?: string;
  actions: boolean;
  'read-auth': boolean;
  'allowed-host'?: string[];
  match: string;
  'min-idle-ms': string;
}

/** The dashboard's settings from its flags; a usage error before anything connects. */
export function dashboardSettings(values: Flags): DashboardServerOptions {
  const port = values.port === '0' ? 0 : positiveFlag('--port', values.port, 65535);
  const password = process.env.DASHBOARD_PASSWORD;
  if (values.actions && !password) throw new UsageError('--actions needs $DASHBOARD_PASSWORD (the password of its Basic auth)');
  if (values['read-auth'] && !password) throw new UsageError('--read-auth needs $DASHBOARD_PASSWORD (the password of its Basic auth)');
  const handler = {
    ...(values['base-path'] ? { basePath: values['base-path'] } : {}),
    match: values.match,
    minIdleMs: positiveFlag('--min-idle-ms', values['min-idle-ms']),
    ...(values['allowed-host'] ? { allowedHosts: values['allowed-host'] } : {}),
  };
  // The dashboard's own checks of these (--base-path, --allowed-host), before anything connects.
  try {
    resolveDashboardOptions(handler);
  } catch (err) {
    throw err instanceof InvalidOptionError ? new UsageError(err.message) : err;
  }
  return {
    port,
    host: values.host,
    ...handler,
    ...(values.actions ? { actionsPassword: password } : {}),
    ...(values['read-auth'] ? { readPassword: password } : {}),
  };
}

/**
 * Serves until the process is stopped (Ctrl-C): resolves never. When it cannot serve (the port is
 * taken) it closes the connection and fails: an open connection would keep the process alive.
 */
export async function runDashboard(redis: RedisConnection, settings: DashboardServerOptions, io: CliIo): Promise<number> {
  const { url } = await serveDashboard(redis, { ...settings, logger: { log: (message) => io.out(message) } }).catch((err: unknown) => {
    redis.disconnect();
    // A flag the dashboard's options refuse (--base-path): a usage error, like the flags checked here.
    throw err instanceof InvalidOptionError ? new UsageError(err.message) : err;
  });
  const mode =
    settings.actionsPassword !== undefined
      ? 'actions on, Basic auth'
      : settings.readPassword !== undefined
        ? 'read-only, Basic auth'
        : 'read-only';
  io.out(`dashboard: ${url} (${mode})`);
  return new Promise<number>(() => {});
}
