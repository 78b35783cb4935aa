import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CaptureServer, startCaptureServer } from "../helpers/capture-server.js";
import { clientVersion, freshHome, isolatedEnv, NODE24, runProcess, runScenarios } from "../helpers/clients.js";
import { type ClientFixture, clientFixture, clientFixtures, FIXTURES_DIR, fixtureFile } from "../helpers/fixtures.js";

/**
 * The client harness and its golden fixtures (docs/clients.md): scenario scripts run on the
 * Node 24 of test/clients/ and report each scenario; a client process reaches nothing beyond
 * loopback and ends when its time is up; and the fixtures of test/fixtures/clients/ are those of
 * the pinned clients, cover the shapes issue 37 names, and hold no secret.
 */
let capture: CaptureServer;

/** A process's state letter from /proc (`R`, `S`, `Z`…), or `gone`. */
function processState(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").replace(/^.*\) /s, "")[0]!;
  } catch {
    return "gone";
  }
}

beforeAll(async () => {
  capture = await startCaptureServer();
});

afterAll(async () => {
  await capture?.close();
});

describe("the harness", () => {
  it("runs a scenario script on Node 24 with its input on stdin and returns each scenario's outcome", async () => {
    const report = await runScenarios("openai", {
      baseURL: capture.origin,
      apiKey: "sk-harness",
      model: "capture-model",
      only: ["chat", "chat-parse", "nope"],
    });
    expect(report).toMatchObject({ client: "openai", version: clientVersion("openai"), packages: { openai: clientVersion("openai") } });
    expect(report.results.chat).toMatchObject({
      ok: true,
      value: { text: "Captured: Reply with the words purple elephant", finishReason: "stop" },
    });
    // The capture server answers a json_schema request with an object of that schema, which the SDK parses.
    expect(report.results["chat-parse"]).toMatchObject({
      ok: true,
      value: { parsed: { city: "example", temperature: 1, conditions: "sunny" } },
    });
    expect(report.results.nope).toEqual({ ok: false, error: { message: "No scenario nope in openai" } });
    expect(capture.take().map((request) => `${request.method} ${request.path} ${request.dialect}`)).toEqual([
      "POST /v1/chat/completions chat",
      "POST /v1/chat/completions chat",
    ]);
  });

  it("sends a client's connections beyond loopback to a closed port, and leaves loopback direct", async () => {
    const home = await freshHome();
    try {
      const script = `
        const tryFetch = (url) => fetch(url).then((r) => "reached " + r.status, (e) => "refused");
        console.log(await tryFetch("https://api.openai.com/v1/models"), "|", await tryFetch(process.argv[1]));`;
      const run = await runProcess(NODE24, ["--input-type=module", "-e", script, `${capture.origin}/v1/models`], {
        env: await isolatedEnv(home.path),
        cwd: home.path,
        timeoutMs: 10_000,
      });
      expect(run.stdout.trim()).toBe("refused | reached 200");
    } finally {
      await home.remove();
      capture.take();
    }
  });

  it("kills a run that outlives its time, with the processes it started", async () => {
    const home = await freshHome();
    try {
      // A shell that starts a grandchild and waits: both must end when the time is up.
      const run = await runProcess("bash", ["-c", "sleep 30 & echo $!; wait"], {
        env: await isolatedEnv(home.path),
        cwd: home.path,
        timeoutMs: 300,
      });
      expect(run.timedOut).toBe(true);
      const grandchild = Number(run.stdout.trim());
      expect(grandchild).toBeGreaterThan(0);
      // Gone, or a zombie waiting for whoever adopted it to reap it: either way it runs no more.
      expect(processState(grandchild)).toMatch(/^(gone|Z)$/);
    } finally {
      await home.remove();
    }
  });
});

describe("the golden fixtures", () => {
  const fixtures = clientFixtures();

  it("were recorded with the clients test/clients pins (npm run clients:record after npm run clients:update)", () => {
    const cli: Record<string, string> = { "claude-code": "@anthropic-ai/claude-code", codex: "@openai/codex" };
    for (const fixture of fixtures) {
      const where = fixtureFile(fixture.client, fixture.scenario);
      if (cli[fixture.client]) expect(fixture.version, where).toBe(clientVersion(cli[fixture.client]!));
      for (const [name, version] of Object.entries(fixture.packages ?? {})) expect(version, `${where}: ${name}`).toBe(clientVersion(name));
      expect(fixture.requests.length, where).toBeGreaterThan(0);
    }
  });

  it("cover every client and scenario of issue 37", () => {
    const names = new Set(fixtures.map((fixture) => `${fixture.client}-${fixture.scenario}`));
    const expected = [
      "claude-code-prompt",
      "claude-code-tool-round-trip",
      "codex-exec-prompt",
      "codex-exec-tool-round-trip",
      ...[
        "chat",
        "chat-stream",
        "chat-tools",
        "chat-parse",
        "responses",
        "responses-stream",
        "responses-tools",
        "responses-parse",
        "embeddings",
      ].map((scenario) => `openai-${scenario}`),
      ...["messages", "messages-stream", "messages-tools", "messages-parse"].map((scenario) => `anthropic-sdk-${scenario}`),
      ...["responses", "chat", "anthropic", "compatible"].flatMap((provider) =>
        ["text", "stream", "tools", "object"].map((kind) => `ai-sdk-${provider}-${kind}`),
      ),
      "ai-sdk-embed",
      "ai-sdk-embed-many",
      "langchain-openai-structured",
      "langchain-anthropic-structured",
      "openai-agents-responses-output",
      "openai-agents-chat-output",
    ];
    expect(expected.filter((name) => !names.has(name))).toEqual([]);
  });

  it("show Claude Code's request as issue 37 describes it: system-role messages, adaptive thinking, context management, output_config, many tools", () => {
    const [first] = clientFixture("claude-code", "prompt").requests;
    expect(first).toMatchObject({ method: "POST", dialect: "messages", headers: { authorization: "Bearer <secret>" } });
    expect(first!.path).toMatch(/^\/v1\/messages/);
    const body = first!.body as any;
    expect(body.messages.map((message: { role: string }) => message.role)).toContain("system");
    expect(body.thinking).toMatchObject({ type: "adaptive" });
    expect(body.context_management).toBeDefined();
    expect(body.output_config).toHaveProperty("effort");
    expect(body.tools.length).toBeGreaterThanOrEqual(10);
    expect((clientFixture("claude-code", "prompt-all-tools").requests[0]!.body as any).tools.length).toBeGreaterThanOrEqual(20);
  });

  it("show Codex's Responses request with its namespace and web_search tools (tools.4 is the namespace)", () => {
    const [first] = clientFixture("codex", "exec-prompt").requests;
    expect(first).toMatchObject({ method: "POST", path: "/v1/responses", dialect: "responses" });
    const types = ((first!.body as any).tools as { type: string }[]).map((tool) => tool.type);
    expect(types[4]).toBe("namespace");
    expect(types).toContain("web_search");
  });

  it("carry each SDK's structured output in its dialect's native field", () => {
    const body = (client: string, scenario: string) => clientFixture(client, scenario).requests[0]!.body as any;
    expect(body("openai", "chat-parse").response_format.type).toBe("json_schema");
    expect(body("openai", "responses-parse").text.format.type).toBe("json_schema");
    expect(body("anthropic-sdk", "messages-parse").output_config.format.type).toBe("json_schema");
    expect(body("ai-sdk", "responses-object").text.format.type).toBe("json_schema");
    expect(body("ai-sdk", "chat-object").response_format.type).toBe("json_schema");
    expect(body("openai-agents", "responses-output").text.format.type).toBe("json_schema");
    // Without a native field the SDK asks for a tool call or plain JSON mode: the fixture says which.
    expect(body("ai-sdk", "anthropic-object").tool_choice ?? body("ai-sdk", "anthropic-object").output_config).toBeDefined();
    expect(body("ai-sdk", "compatible-object").response_format.type).toMatch(/^json_(object|schema)$/);
  });

  it("hold no secret and no path of the machine that recorded them", () => {
    const leaks: string[] = [];
    for (const fixture of fixtures) {
      const file = fixtureFile(fixture.client, fixture.scenario);
      const text = readFileSync(join(FIXTURES_DIR, file), "utf8");
      if (/sk-capture|\/tmp\/(client-home|claude-code|codex)-/.test(text)) leaks.push(file);
      for (const request of fixture.requests as ClientFixture["requests"])
        for (const [name, value] of Object.entries(request.headers))
          if (/authorization|api-key/i.test(name) && !/^(Bearer )?<secret>$/.test(value)) leaks.push(`${file}: ${name}`);
    }
    expect(leaks).toEqual([]);
  });
});
