import { defineConfig } from 'vitest/config';

// The tests run against a real turngate that the Go test
// e2e/tsclient_test.go starts (replicas behind one front door, with a
// control endpoint), one per test file; see test/world.ts. The tests of a
// file share it, so they run one at a time.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
