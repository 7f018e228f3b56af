#!/usr/bin/env node
// The `redis-streams-dlq` command: the built CLI (dist/esm/cli/dlq.js). A file of its own, present before any
// build, so that npm links the command when it installs this workspace (npx redis-streams-dlq in the repository).
await import('../dist/esm/cli/dlq.js').catch((err) => {
  if (err?.code !== 'ERR_MODULE_NOT_FOUND' || !String(err.message).includes('/dist/esm/cli/')) throw err;
  process.stderr.write('redis-streams-dlq: the library is not built yet: run npm run build\n');
  process.exit(1);
});
