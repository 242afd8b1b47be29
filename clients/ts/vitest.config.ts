import { defineConfig } from 'vitest/config';

// The tests run against real turngate processes that the Go test
// e2e/tsclient_test.go starts: a world per test file (a database, replicas
// behind one front door, with a control endpoint). It passes their
// addresses in TURNGATE_WORLDS, by the file's name:
//   {"stream": {"url": "http://…/graphql", "control": "http://…"}, …}
// Each file is then a project with its world in its environment (see
// test/world.ts), and the files run at once, in one vitest process; the
// tests of a file share its world, so they run one at a time. Without
// TURNGATE_WORLDS the files run one after another against the one world
// TURNGATE_URL and TURNGATE_CONTROL name.
type World = { url: string; control: string };
const worlds = Object.entries(JSON.parse(process.env.TURNGATE_WORLDS ?? '{}') as Record<string, World>);

export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    ...(worlds.length === 0
      ? { include: ['test/**/*.test.ts'], fileParallelism: false }
      : {
          maxWorkers: worlds.length,
          projects: worlds.map(([name, w]) => ({
            extends: true,
            test: { name, include: [`test/${name}.test.ts`], env: { TURNGATE_URL: w.url, TURNGATE_CONTROL: w.control } },
          })),
        }),
  },
});
