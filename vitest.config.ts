import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: more workers than that only adds contention.
    maxWorkers: 2,
    globalSetup: ["test/helpers/global-setup.ts"],
    // Type-level tests (`*.test-d.ts`, e.g. test/rpc/dispatcher.test-d.ts) run with the others:
    // the type checker over those files and what they import.
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "test/tsconfig.typecheck.json" },
  },
});
