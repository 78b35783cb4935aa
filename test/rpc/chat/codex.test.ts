import { describe, expect, it } from "vitest";
import { usageOf } from "../../helpers/chat.js";
import { runCodexExec } from "../../helpers/cli-clients.js";
import { cliService, expectToolRoundTrip, runMarker } from "../../helpers/cli-tool-round-trip.js";
import { cliVersion, codexCommand } from "../../helpers/clients.js";

/**
 * The Codex CLI, the release test/clients/ pins (docs/clients.md "Codex CLI"), run as `codex exec`
 * with its default settings and a config whose model provider is the service: `base_url` the
 * surface's root plus `/v1`, the Responses wire API (the only one Codex offers), the key in an
 * environment variable (`env_key`; no login), plus the switches that keep it offline. On each
 * surface and each kind of model (the echo model, an OpenAI-compatible one, an Anthropic one) it
 * runs its own `exec_command` tool: the model asks for it, Codex runs it in its sandbox and sends
 * the output back, and the model's answer quotes it. Fresh HOME and CODEX_HOME, nothing reachable
 * beyond loopback, bounded in time; two runs at a time.
 */
const VERSION = cliVersion(codexCommand());

const service = cliService("codex");
const { openai, anthropic } = service;

const SURFACES = [
  { name: "Gateway", root: "/gateway", operation: "gateway.responses.create", key: () => service.gatewayKey, user: () => service.alice },
  { name: "Account", root: "/account", operation: "account.responses.create", key: () => service.bobKey, user: () => service.bob },
];

const MODELS = [
  // The echo model calls a tool when the last user text is its directive (docs/models-and-chat.md "Tool calls").
  { id: "echo-1", prompt: (command: string) => `/tool exec_command ${JSON.stringify({ cmd: command })}`, upstream: undefined },
  { id: "gpt", prompt: (command: string) => `Run this command: ${runMarker(command)}`, upstream: openai },
  { id: "claude", prompt: (command: string) => `Run this command: ${runMarker(command)}`, upstream: anthropic },
];

describe.concurrent(`Codex CLI ${VERSION} through the service`, () => {
  for (const surface of SURFACES)
    for (const model of MODELS)
      it(`on the ${surface.name} API with ${model.id}: codex exec has its exec_command tool run and answers with the output, metered`, async () => {
        const tag = `${surface.name}-${model.id}`.toLowerCase();
        // Only a shell turns this into `<tag>-ran-42`: the answer shows that the tool really ran.
        const command = `echo ${tag}-ran-$((40+2))`;
        const before = await usageOf(service.server, surface.user().token, model.id);
        const run = await runCodexExec({
          baseURL: service.server.url(surface.root),
          key: surface.key(),
          model: model.id,
          prompt: model.prompt(command),
          timeoutMs: 60_000,
        });
        expect(run.code, `exit ${run.code}${run.timedOut ? " (timed out)" : ""}\n${run.stdout}\n${run.stderr}`).toBe(0);
        // `codex exec` prints the model's last answer on stdout.
        expect(run.stdout).toContain(`${tag}-ran-42`);

        // Both turns came through the surface's Responses route and were answered.
        await expectToolRoundTrip(
          service,
          { operation: surface.operation, model: model.id, user: surface.user(), before, tag, tool: "exec_command" },
          model.upstream,
        );
      }, 90_000);

  it("a wrong key ends codex exec with the gateway's 401", async () => {
    const run = await runCodexExec({
      baseURL: service.server.url("/gateway"),
      key: "sk_not_a_key",
      model: "echo-1",
      prompt: "hello",
      timeoutMs: 60_000,
    });
    expect(run.code).not.toBe(0);
    expect(`${run.stdout}${run.stderr}`).toMatch(/401|unauthorized|invalid/i);
    expect(service.server.logs().some((line) => line.path === "/gateway/v1/responses" && line.status === 401)).toBe(true);
  }, 90_000);
});
