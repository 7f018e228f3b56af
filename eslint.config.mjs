// ESLint with typescript-eslint's recommended rules, as the `nest new` template ships (flat config;
// like the template, `any` is allowed: Nest's own types hand it out).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const nodeGlobals = Object.fromEntries(
  [
    'console',
    'process',
    'Buffer',
    'URL',
    'fetch',
    'AbortSignal',
    'AbortController',
    'performance',
    'setTimeout',
    'clearTimeout',
    'setInterval',
    'clearInterval',
    'setImmediate',
  ].map((name) => [name, 'readonly']),
);

/** The Nest adapter's files, which nothing below it imports (dependency-cruiser checks every layer; this is the editor's view). */
const ADAPTER_FILES = [
  '**/server/*',
  '**/client/*',
  '**/terminus/*',
  '**/context.js',
  '**/batch.js',
  '**/dead-letter.exception.js',
  '**/retry-later.exception.js',
  '**/rate-limited.exception.js',
  '**/transport.js',
];

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'bench/results/**',
      'fixtures/**',
      // Generated: the dashboard's browser code, bundled (its sources in dashboard/browser/ are linted).
      'libs/redis-streams/src/dashboard/app-script.ts',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: nodeGlobals },
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      // A leading underscore says "unused on purpose" (a handler's context it does not read).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true }],
      '@typescript-eslint/no-unused-expressions': ['error', { allowShortCircuit: true, allowTernary: true }],
    },
  },
  {
    // CommonJS files (test fixtures that check the require() path): require is their import.
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable' } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The layering (docs/architecture.md): below the Nest adapter nothing imports Nest, nor the
    // adapter's own Nest-facing files.
    files: ['libs/redis-streams/src/**/*.ts'],
    ignores: [
      'libs/redis-streams/src/server/**',
      'libs/redis-streams/src/client/**',
      'libs/redis-streams/src/terminus/**',
      'libs/redis-streams/src/{context,batch,dead-letter.exception,retry-later.exception,rate-limited.exception,transport,index}.ts',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@nestjs/*'], message: 'Only the Nest adapter (server/, client/, terminus/, contexts, transport.ts) imports Nest.' },
            {
              group: ADAPTER_FILES,
              message: 'The adapter sits on top: the layers below it do not import it.',
            },
          ],
        },
      ],
    },
  },
  {
    // nestjs-redis-streams/core is the consumer for plain Node: besides the rule above, it never
    // reaches the main entry (index.ts loads the Nest adapter). A later block replaces the rule, so
    // it names the adapter's files again.
    files: ['libs/redis-streams/src/core/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['@nestjs/*'], message: 'nestjs-redis-streams/core loads no @nestjs/* module.' },
            {
              group: [...ADAPTER_FILES, '../index.js'],
              message: 'nestjs-redis-streams/core sits beside the Nest adapter, below nothing of it: it imports none of its files.',
            },
          ],
        },
      ],
    },
  },
  {
    // One way to register a Lua script: a LuaScript given to defineLuaScripts (redis/lua/lua-script.ts).
    files: ['libs/redis-streams/src/**/*.ts'],
    ignores: ['libs/redis-streams/src/redis/lua/lua-script.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='defineCommand']",
          message: 'Register scripts with defineLuaScripts (redis/lua/lua-script.ts): one way for every script.',
        },
      ],
    },
  },
  {
    // The dashboard's browser code (bundled into the page's script): typed throughout, no `any` (what the
    // server sends is declared in browser/api-replies.ts). Its tsconfig keeps Node's types out.
    files: ['libs/redis-streams/src/dashboard/browser/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'error' },
  },
);
