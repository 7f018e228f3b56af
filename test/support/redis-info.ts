/** An INFO (or CLUSTER INFO) reply as fields: `role:master` → `{ role: 'master' }` (the scripts' parser, typed). */
export { parseInfo } from '../../scripts/lib/redis-server.mjs';
