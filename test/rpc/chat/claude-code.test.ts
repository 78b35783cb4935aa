import { describe, expect, it } from "vitest";
import { usageOf } from "../../helpers/chat.js";
import { runClaudeCode } from "../../helpers/cli-clients.js";
import { cliService, expectToolRoundTrip, runMarker } from "../../helpers/cli-tool-round-trip.js";
import { claudeBinary, cliVersion } from "../../helpers/clients.js";

/**
 * Claude Code itself, the release test/clients/ pins (docs/clients.md), pointed at the service as
 * docs/dialects.md "Claude Code" says, with its default settings: `ANTHROPIC_BASE_URL` the
 * surface's root, the key as `ANTHROPIC_AUTH_TOKEN` (Gateway, a gateway key) or
 * `ANTHROPIC_API_KEY` (Account API, a personal key), `--model` an id of the catalog. On each
 * surface and each kind of model (the echo model, an OpenAI-compatible one, an Anthropic one) it
 * runs its own Bash tool: the model asks for it, Claude Code runs it and sends the result back,
 * and the model's answer quotes it. Each run has a fresh HOME, telemetry and updates off, nothing
 * reachable beyond loopback and a bounded time (test/helpers/clients.ts); the runs of the file go
 * two at a time.
 */
const VERSION = cliVersion([claudeBinary()]);

const service = cliService("claude code");
const { openai, anthropic } = service;

const SURFACES = [
  {
    name: "Gateway",
    root: "/gateway",
    operation: "gateway.messages.create",
    auth: "bearer" as const,
    key: () => service.gatewayKey,
    user: () => service.alice,
  },
  {
    name: "Account",
    root: "/account",
    operation: "account.messages.create",
    auth: "x-api-key" as const,
    key: () => service.bobKey,
    user: () => service.bob,
  },
];

const MODELS = [
  // The echo model calls a tool when the last user text is its directive (docs/models-and-chat.md
  // "Tool calls"); the leading space keeps Claude Code from reading the prompt as a slash command.
  {
    id: "echo-1",
    prompt: (command: string) => ` /tool Bash ${JSON.stringify({ command, description: "Print a marker" })}`,
    upstream: undefined,
  },
  { id: "gpt", prompt: (command: string) => `Run this command: ${runMarker(command)}`, upstream: openai },
  { id: "claude", prompt: (command: string) => `Run this command: ${runMarker(command)}`, upstream: anthropic },
];

describe.concurrent(`Claude Code ${VERSION} through the service`, () => {
  for (const surface of SURFACES)
    for (const model of MODELS)
      it(`on the ${surface.name} API with ${model.id}: claude -p has its Bash tool run and answers with the result, metered`, async () => {
        const tag = `${surface.name}-${model.id}`.toLowerCase();
        // Only a shell turns this into `<tag>-ran-42`: the answer shows that the tool really ran.
        const command = `echo ${tag}-ran-$((40+2))`;
        const before = await usageOf(service.server, surface.user().token, model.id);
        const run = await runClaudeCode({
          baseURL: service.server.url(surface.root),
          key: surface.key(),
          auth: surface.auth,
          model: model.id,
          prompt: model.prompt(command),
          args: ["--allowedTools", "Bash"],
          timeoutMs: 60_000,
        });
        expect(run.code, `exit ${run.code}${run.timedOut ? " (timed out)" : ""}\n${run.stdout}\n${run.stderr}`).toBe(0);
        expect(run.stdout).toContain(`${tag}-ran-42`);

        // Every request of the run came through the surface's Messages route and was answered.
        await expectToolRoundTrip(
          service,
          { operation: surface.operation, model: model.id, user: surface.user(), before, tag, tool: "Bash" },
          model.upstream,
        );
      }, 90_000);

  it("a wrong key ends claude -p with the gateway's refusal, in Anthropic's envelope", async () => {
    const run = await runClaudeCode({
      baseURL: service.server.url("/gateway"),
      key: "sk_not_a_key",
      auth: "bearer",
      model: "echo-1",
      prompt: "hello",
      // Claude Code retries a refused request with backoff (ten times by default): once is enough here.
      env: { CLAUDE_CODE_MAX_RETRIES: "0" },
      timeoutMs: 60_000,
    });
    expect(run.code).not.toBe(0);
    expect(`${run.stdout}${run.stderr}`).toMatch(/401|auth|API key|Invalid/i);
    expect(service.server.logs().some((line) => line.path === "/gateway/v1/messages" && line.status === 401)).toBe(true);
  }, 90_000);
});
