// The library's layers (docs/architecture.md, "Layers"), enforced by dependency-cruiser:
// `npm run lint:layers` (CI's style lane). Bottom to top; a layer imports only the layers below it
// (and itself), never a layer above or beside it that is not listed. Every file of
// libs/redis-streams/src is in exactly one layer: a file in none fails `in-no-layer`.
const SRC = '^libs/redis-streams/src/';

// The Nest adapter's own top-level files (the only ones besides server/, client/, terminus/ that import @nestjs/*).
const NEST_FILES = '(context|batch|dead-letter\\.exception|retry-later\\.exception|rate-limited\\.exception|transport)\\.ts$';

const LAYER = {
  // Plain, Nest-free helpers and shared shapes at the top level of src/ (the entry, the hash slots, marks, printing).
  base: `${SRC}(?!${NEST_FILES}|index\\.ts$)[^/]+\\.ts$`,
  codec: `${SRC}codec/`,
  options: `${SRC}options/`,
  redis: `${SRC}redis/`,
  consumer: `${SRC}consumer/`,
  health: `${SRC}health/`,
  telemetry: `${SRC}telemetry/`,
  engine: `${SRC}engine/`,
  // The Nest-free public consumer (StreamConsumer, entry point nestjs-redis-streams/core).
  core: `${SRC}core/(?!index\\.ts$)`,
  // Its entry point: the Nest-free public API (the consumer and the Nest-free tools: dead letters, dashboard).
  coreEntry: `${SRC}core/index\\.ts$`,
  dlq: `${SRC}dlq/`,
  ops: `${SRC}ops/`,
  dashboard: `${SRC}dashboard/(?!browser/)`,
  // The dashboard page's browser code: bundled into dashboard/app-script.ts (a string), never imported by the library.
  browser: `${SRC}dashboard/browser/`,
  // The Nest adapter: transport, client, health indicator, contexts and exceptions.
  nest: `${SRC}(server/|client/|terminus/|${NEST_FILES})`,
  cli: `${SRC}cli/`,
  // The package's root entry point: what it re-exports is the public API.
  entry: `${SRC}index\\.ts$`,
};

const any = (...names) => names.map((n) => LAYER[n]);

/** What each layer may import inside src/ (itself included). */
const MAY_IMPORT = {
  base: ['base'],
  codec: ['base', 'codec'],
  options: ['base', 'codec', 'options'],
  redis: ['base', 'codec', 'options', 'redis'],
  consumer: ['base', 'codec', 'options', 'redis', 'consumer'],
  health: ['base', 'codec', 'options', 'redis', 'consumer', 'health'],
  telemetry: ['base', 'codec', 'options', 'redis', 'consumer', 'health', 'telemetry'],
  engine: ['base', 'codec', 'options', 'redis', 'consumer', 'health', 'telemetry', 'engine'],
  core: ['base', 'codec', 'options', 'redis', 'consumer', 'health', 'telemetry', 'engine', 'core'],
  coreEntry: ['base', 'codec', 'options', 'redis', 'consumer', 'health', 'telemetry', 'engine', 'core', 'dlq', 'ops', 'dashboard'],
  dlq: ['base', 'codec', 'options', 'redis', 'dlq'],
  ops: ['base', 'codec', 'options', 'redis', 'dlq', 'ops'],
  dashboard: ['base', 'codec', 'options', 'redis', 'health', 'dlq', 'ops', 'dashboard'],
  browser: ['browser'],
  nest: ['base', 'codec', 'options', 'redis', 'consumer', 'health', 'telemetry', 'engine', 'core', 'dlq', 'ops', 'dashboard', 'nest'],
  cli: ['base', 'codec', 'options', 'redis', 'dlq', 'ops', 'dashboard', 'cli'],
  entry: Object.keys(LAYER).filter((n) => n !== 'cli' && n !== 'coreEntry' && n !== 'browser'),
};

const WHY = {
  base: 'plain helpers and shared shapes import nothing of the library but each other',
  codec: 'the codec is pure: it imports only the plain helpers',
  options: 'options are pure: plain helpers and the codec (the default serializers), never Redis',
  redis: 'redis/ speaks to Redis for everyone: it knows options and the codec, nothing that uses it',
  consumer:
    "the loop's steps use redis/, options and the codec; they report through their own observer interfaces (consumer/settle/settle-observer.ts), never telemetry/ or engine/",
  health: 'health reads the loop and Redis, never telemetry/, engine/ or a host',
  telemetry: 'telemetry implements the observer interfaces of consumer/ and reads health; never engine/ or a host',
  engine: 'the engine (plan, readers, lifecycle) sits under the hosts: it never imports a host, a tool or Nest',
  core: 'core/ (StreamConsumer) is Nest-free: it imports the engine and what is under it, never server/, client/, terminus/ or a tool',
  coreEntry: 'core/index.ts is the Nest-free public API: the consumer and the Nest-free tools, never a Nest host or the CLI',
  dlq: 'DeadLetters uses redis/, options and the codec only',
  ops: 'the read model (inspect, attention, pending states) uses redis/ and dlq/ only, never a host or the CLI',
  dashboard: 'the dashboard uses the read model (ops/), dlq/, health and redis/, never the CLI (the CLI imports it)',
  browser:
    "the page's browser code runs in the browser: it imports only itself (the server's replies are declared in browser/api-replies.ts)",
  nest: 'the Nest adapter may use everything below it, never the CLI',
  cli: 'the CLI is a tool on top: it uses dashboard/, ops/, dlq/, redis/, never the engine or a Nest host',
  entry: 'index.ts is the public API: it never loads the CLI',
};

const layerRules = Object.entries(MAY_IMPORT).map(([name, allowed]) => ({
  name: `layer-${name}`,
  comment: `${name} (${LAYER[name]}): ${WHY[name]}. It may import: ${allowed.join(', ')}.`,
  severity: 'error',
  from: { path: LAYER[name] },
  to: { path: SRC, pathNot: any(...allowed) },
}));

const ALL = Object.values(LAYER);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import cycles, type-only imports included: move what two files share into the concept it belongs to.',
      severity: 'error',
      from: { path: SRC },
      to: { circular: true },
    },
    {
      name: 'in-no-layer',
      comment:
        'Every file under libs/redis-streams/src is in one layer: give a new folder its layer in .dependency-cruiser.cjs (and docs/architecture.md).',
      severity: 'error',
      from: { path: SRC, pathNot: [...ALL, '\\.d\\.ts$'] },
      to: {},
    },
    {
      name: 'imports-file-in-no-layer',
      comment: 'Imports a file that is in no layer: give its folder a layer in .dependency-cruiser.cjs (and docs/architecture.md).',
      severity: 'error',
      from: { path: SRC },
      to: { path: SRC, pathNot: ALL },
    },
    {
      name: 'no-orphans',
      comment: 'A file nothing imports and that imports nothing: dead, or in no layer.',
      severity: 'error',
      from: { orphan: true, path: SRC, pathNot: '\\.d\\.ts$' },
      to: {},
    },
    {
      name: 'nest-only-in-the-adapter',
      comment: 'Only the Nest adapter (server/, client/, terminus/, contexts, exceptions, transport.ts) and index.ts import @nestjs/*.',
      severity: 'error',
      from: { path: SRC, pathNot: [LAYER.nest, LAYER.entry] },
      to: { path: '(^|node_modules/)@nestjs/' },
    },
    {
      name: 'redis-commands-only-in-redis',
      comment:
        'Every command to Redis is sent from redis/: nothing else imports ioredis but for its types (a Redis | Cluster in a signature).',
      severity: 'error',
      from: { path: SRC, pathNot: LAYER.redis },
      to: { path: '(^|node_modules/)ioredis/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'settle-knows-no-flow-control',
      comment:
        'Settling an entry (consumer/settle/) knows no flow control, tenure or reading: the gates reach it through its Admission port (settle/admission.ts), the tenure wraps it from above.',
      severity: 'error',
      from: { path: `${SRC}consumer/settle/` },
      to: { path: `${SRC}consumer/(intake|tenure|read|upkeep)/` },
    },
    ...layerRules,
  ],
  options: {
    // @nestjs/* are not followed, but reported as dependencies (nest-only-in-the-adapter reads them).
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a dependency is a dependency.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.d.ts', '.js'],
    },
    cache: false,
  },
};
