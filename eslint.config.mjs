// aerie's linter: the two safety rules of temporalio/samples-typescript (.shared/.eslintrc.js) and one sibling,
// nothing stylistic.
// - no-floating-promises: a promise nobody awaits loses its rejection; in an activity or the CLI that is an
//   unhandled rejection that kills the process, in a workflow it is a step that silently never happened.
// - workflow code runs in Temporal's deterministic sandbox, bundled by webpack: a Node built-in there fails the
//   bundle at worker start, and any other module it pulls in by value must itself be sandbox-safe.
import { builtinModules } from 'node:module';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';

// Bare names ('fs', 'fs/promises') and every 'node:' name; '_http_agent' and the like are internals nobody imports.
const BUILTIN = `node:.*|(${builtinModules.filter((m) => !m.startsWith('_')).join('|')})(/.*)?`;

// Modules outside src/workflows/ that workflow code imports by value (they are bundled with it). Each must stay
// free of Node built-ins and packages, and import others only as types; the second block below holds them to it.
const WORKFLOW_VALUE_IMPORTS = ['shared', 'config/heartbeat', 'config/pool', 'stages/launch-specs', 'failures'];

export default defineConfig(
  {
    ignores: [
      'dist/**',
      'dist.tmp-*/**',
      'node_modules/**',
      'tmp/**',
      'scratch/**',
      '.venv*/**',
      '**/__pycache__/**',
      'test/fixtures/**',
    ],
  },
  {
    files: ['**/*.ts', '**/*.mts', '**/*.mjs'],
    // Off: the tree carries directives for core rules this config does not enable (e.g. no-control-regex).
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    languageOptions: {
      parser: tseslint.parser,
      parserOptions: {
        projectService: { allowDefaultProject: ['bin/*.mjs', 'eslint.config.mjs', 'test/server/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { '@typescript-eslint': tseslint.plugin },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // The same loss in disguise: an async callback handed to something that ignores its result (an event
      // listener, setInterval, a 'void' parameter) rejects into nowhere.
      '@typescript-eslint/no-misused-promises': 'error',
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: `^(${BUILTIN})$`, message: 'Node built-ins cannot run in the workflow sandbox.' },
            {
              regex: `^(?![.]|@temporalio/(workflow|common)$|(${BUILTIN})$)`,
              allowTypeImports: true,
              message:
                'Workflow code imports only @temporalio/workflow and @temporalio/common by value (others as `import type`).',
            },
            {
              regex: `^[.][.]/(?!(${WORKFLOW_VALUE_IMPORTS.join('|')})[.]js$)`,
              allowTypeImports: true,
              message: `Workflow code imports by value only its own folder and ${WORKFLOW_VALUE_IMPORTS.map((m) => `src/${m}.ts`).join(', ')} (add a module to WORKFLOW_VALUE_IMPORTS in eslint.config.mjs only if it is sandbox-safe); use \`import type\` for the rest.`,
            },
          ],
        },
      ],
    },
  },
  {
    files: WORKFLOW_VALUE_IMPORTS.map((m) => `src/${m}.ts`),
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: `^(${BUILTIN})$`,
              message: 'This module is bundled into the workflow sandbox, where Node built-ins cannot run.',
            },
            {
              regex: `^(?!(${BUILTIN})$)`,
              allowTypeImports: true,
              message:
                'This module is bundled into the workflow sandbox (see WORKFLOW_VALUE_IMPORTS in eslint.config.mjs): import only types here.',
            },
          ],
        },
      ],
    },
  },
);
