#!/usr/bin/env node
// The `redis-streams` command: the built CLI (dist/esm/cli/redis-streams.js). A file of its own, present before any
// build, so that npm links the command when it installs this workspace (npx redis-streams in the repository).
await import('../dist/esm/cli/redis-streams.js').catch((err) => {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('/dist/esm/cli/')) throw err;
  process.stderr.write('redis-streams: the library is not built yet: run npm run build\n');
  process.exit(1);
});
