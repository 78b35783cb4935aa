/**
 * What routing across deployments costs in-process (docs/benchmarks.md "Two deployments"): the
 * same request answered by a model with one deployment (its provider called directly) and by a
 * model with two (through RoutingProvider: pick, attempt bookkeeping, the relay of a stream),
 * both on the built-in echo provider so the upstream costs the same, in alternating rounds.
 * No network, no storage: the difference is routing's own CPU per call.
 *
 *   npm run bench:routing
 *
 * Environment: BENCH_CALLS (JSON calls per round, default 50000; streams take 2/5 of that).
 */
import { ModelRouter } from "../rpc/chat/model-router.js";
import { loadModels } from "../rpc/chat/models-config.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 50_000);
const router = new ModelRouter(
  loadModels({
    MODELS_JSON: JSON.stringify({
      models: {
        one: { provider: "echo" },
        two: {
          deployments: [
            { provider: "echo", weight: 1 },
            { provider: "echo", weight: 1 },
          ],
        },
      },
    }),
  }),
  { MODEL_TIMEOUT_SECONDS: 30 },
  {},
);
const messages = [{ role: "user" as const, content: "Say hello in five words." }];
const signal = new AbortController().signal;

/** Mean µs per call of `calls` sequential calls to the model `id`. */
async function run(id: string, calls: number, stream: boolean): Promise<number> {
  const provider = router.get(id)!.provider;
  const started = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) {
    const result = await provider.complete({ model: id, messages, ...(stream ? { stream: true } : {}) }, signal);
    if (result.kind === "stream") for await (const _chunk of result.chunks);
  }
  return Number(process.hrtime.bigint() - started) / calls / 1000;
}

for (const stream of [false, true]) {
  const calls = stream ? Math.round(CALLS * 0.4) : CALLS;
  const differences: number[] = [];
  for (let round = 0; round < 6; round++) {
    const one = await run("one", calls, stream);
    const two = await run("two", calls, stream);
    // The first round warms both paths up; it is printed, not counted.
    if (round > 0) differences.push(two - one);
    console.log(
      `${stream ? "stream" : "JSON  "} round ${round}: one deployment ${one.toFixed(2)} µs/call, two ${two.toFixed(2)} µs/call, difference ${(two - one).toFixed(2)} µs`,
    );
  }
  differences.sort((a, b) => a - b);
  console.log(
    `${stream ? "stream" : "JSON"}: median difference ${differences[Math.floor(differences.length / 2)]!.toFixed(2)} µs per call`,
  );
}
