import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'data/**',
      '.data-test*/**',
      'coverage/**',
      'bench/results/**',
      'client-sdk/dist/**',
      'client-sdk/.build/**',
      'dist/**',
      // Type-checked on its own against generated types (tests/openapi/typed-client.test.ts).
      'tests/openapi/typed-client/**',
      // Mocha's configuration (the test tiers): plain CommonJS that mocha loads before tsx, outside the TypeScript
      // program.
      '.mocharc.cjs',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    // Type-aware rules. tsconfig.eslint.json is the root project plus client-sdk/src and the SDK's type tests
    // (each has its own tsconfig.json for `npm run typecheck`), with `@cloud-platform/client` mapped to
    // client-sdk/src: one TypeScript program for every file, which lints in about two thirds of the time and
    // memory of one program per tsconfig.json.
    languageOptions: {
      parserOptions: { project: './tsconfig.eslint.json', tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      // Promises: none forgotten (a deliberate one is marked `void` with the reason), none where a callback's
      // result is ignored, no `await` of a non-promise, and a promise returned from a `try` is awaited there so that
      // its rejection reaches the `catch`/`finally`.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/return-await': ['error', 'error-handling-correctness-only'],
      // Only Error objects are thrown or rejected (stack traces, `instanceof` in error mappers).
      '@typescript-eslint/only-throw-error': 'error',
      '@typescript-eslint/prefer-promise-reject-errors': 'error',
      // A switch over a union handles every member (or has a default).
      '@typescript-eslint/switch-exhaustiveness-check': [
        'error',
        { considerDefaultExhaustiveForUnions: true, requireDefaultForNonUnion: false },
      ],
      '@typescript-eslint/no-unnecessary-type-assertion': 'error',
      // No `[object Object]` in messages and URLs; no method passed around without its `this`.
      '@typescript-eslint/no-base-to-string': 'error',
      '@typescript-eslint/unbound-method': 'error',
      '@typescript-eslint/no-deprecated': 'error',
    },
  },
  {
    files: ['tests/**/*.ts'],
    rules: { '@typescript-eslint/no-unused-expressions': 'off', '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // Plain JavaScript (this file) belongs to no TypeScript project: syntax rules only.
    files: ['**/*.js'],
    extends: [tseslint.configs.disableTypeChecked],
  },
);
