import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: more workers than that only adds contention.
    maxWorkers: 2,
    // The test files of one worker share its module graph: each file importing the whole server
    // afresh cost the suite about 220 s of its 400 (vitest's "import" time) on a 2-core machine.
    // Every file starts its own servers, storage prefixes and data directories and restores
    // what it changes (timers, environment), so nothing a file relies on is left by another.
    isolate: false,
    globalSetup: ["test/helpers/global-setup.ts"],
    // Password hashes at scrypt N=2^14 instead of 2^17 (rpc/config.ts PASSWORD_SCRYPT_LOG2N): the
    // suite registers hundreds of users; servers it spawns inherit this environment.
    env: { PASSWORD_SCRYPT_LOG2N: "14" },
    // Type-level tests (`*.test-d.ts`, e.g. test/rpc/dispatcher.test-d.ts) run with the others:
    // the type checker over those files and what they import.
    typecheck: { enabled: true, include: ["test/**/*.test-d.ts"], tsconfig: "test/tsconfig.typecheck.json" },
  },
});
