import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Tests run against the library's source, imported by its package name as users do.
    alias: { 'nestjs-redis-streams': fileURLToPath(new URL('./libs/redis-streams/src/index.ts', import.meta.url)) },
  },
  test: {
    globals: true,
    include: ['test/**/*.spec.ts'],
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
