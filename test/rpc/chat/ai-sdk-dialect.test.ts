import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool, type ModelMessage } from "ai";
import { createAnthropicUpstream } from "../../../mocks/anthropic-upstream.js";
import { startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, usageOf, twoCallers, type RegisteredUser } from "../../helpers/chat.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

/**
 * The Vercel AI SDK's default OpenAI provider, `openai(modelId)`, speaks the Responses API
 * (docs/dialects.md "The AI SDK"): text, streamed text and a multi-step tool call loop against
 * the Gateway and Account surfaces, on the echo model and on an Anthropic model behind the
 * gateway, with the usage the SDK reports matching the gateway's metering.
 */

const ANTHROPIC = "https://api.anthropic.test";
const anthropic = createAnthropicUpstream(ANTHROPIC);
const msw = mockUpstreams(...anthropic.handlers);

let server: TestServer;
let alice: RegisteredUser;
let bob: RegisteredUser;
let bobKey: string;

const provider = (base: string, apiKey: string) => createOpenAI({ baseURL: server.url(base), apiKey, fetch: loopbackFetch });

const weather = tool({
  description: "Weather in a city",
  inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
  execute: async ({ city }) => `sunny in ${city}`,
});

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MODELS_JSON: JSON.stringify({
      models: {
        "echo-1": { provider: "echo" },
        claude: { provider: "anthropic", baseURL: msw.url(ANTHROPIC), upstreamModel: "claude-test", maxOutputTokens: 1000 },
      },
    }),
  });
  ({ alice, bob, bobKey } = await twoCallers(server, "ai sdk"));
});

afterAll(async () => {
  await server?.close();
  await msw.close();
});

describe.each([
  ["Gateway", () => provider("/gateway/v1", alice.token), () => alice],
  ["Account", () => provider("/account/v1", bobKey), () => bob],
])("the AI SDK's openai(id) on the %s API", (_surface, openai, owner) => {
  it("generateText on echo: the text and the usage the gateway metered", async () => {
    const before = await usageOf(server, owner().token, "echo-1");
    const result = await generateText({ model: openai()("echo-1"), system: "Be brief.", prompt: "hello from the ai sdk" });
    expect(result.text).toBe("hello from the ai sdk");
    expect(result.finishReason).toBe("stop");
    const after = await usageOf(server, owner().token, "echo-1");
    expect(after.requests - before.requests).toBe(1);
    expect(result.usage.inputTokens).toBe(after.inputTokens - before.inputTokens);
    expect(result.usage.outputTokens).toBe(5);
    expect(after.outputTokens - before.outputTokens).toBe(5);
  });

  it("streamText on echo", async () => {
    const result = streamText({ model: openai()("echo-1"), prompt: "streamed by the sdk" });
    let text = "";
    for await (const part of result.textStream) text += part;
    expect(text).toBe("streamed by the sdk");
    expect((await result.usage).outputTokens).toBe(4);
    expect(await result.finishReason).toBe("stop");
  });

  it("a tool call loop on echo: the SDK runs the tool and sends its result back", async () => {
    const result = await generateText({
      model: openai()("echo-1"),
      tools: { get_weather: weather },
      stopWhen: stepCountIs(3),
      prompt: '/tool get_weather {"city":"Oslo"}',
    });
    expect(result.steps).toHaveLength(2);
    expect(result.steps[0]!.toolCalls).toEqual([expect.objectContaining({ toolName: "get_weather", input: { city: "Oslo" } })]);
    expect(result.text).toBe("sunny in Oslo");
  });

  it("an Anthropic model behind the gateway, streamed, with a tool call loop and the model's own usage", async () => {
    anthropic.reset();
    anthropic.script("claude-test", (_body, turn) =>
      turn === 0
        ? {
            kind: "turn",
            turn: { toolCalls: [{ id: "toolu_9", name: "get_weather", input: { city: "Lyon" } }], usage: { input: 25, output: 7 } },
          }
        : { kind: "turn", turn: { text: "Lyon is sunny", usage: { input: 33, output: 3 } } },
    );
    const before = await usageOf(server, owner().token, "claude");
    const result = streamText({ model: openai()("claude"), tools: { get_weather: weather }, stopWhen: stepCountIs(3), prompt: "Lyon?" });
    let text = "";
    for await (const part of result.textStream) text += part;
    expect(text).toBe("Lyon is sunny");
    expect(await result.totalUsage).toMatchObject({ inputTokens: 58, outputTokens: 10 });
    expect(anthropic.calls[1]!.body.messages.at(-1)).toEqual({
      role: "user",
      content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "sunny in Lyon" }],
    });
    const after = await usageOf(server, owner().token, "claude");
    expect(after.requests - before.requests).toBe(2);
    expect(after.inputTokens - before.inputTokens).toBe(58);
  });

  it("a later turn that refers to a stored item is 400 with what to do; with store false it is answered", async () => {
    const first = await generateText({ model: openai()("echo-1"), prompt: "first turn" });
    const messages: ModelMessage[] = [
      { role: "user", content: "first turn" },
      ...first.response.messages,
      { role: "user", content: "second turn" },
    ];
    await expect(generateText({ model: openai()("echo-1"), messages, maxRetries: 0 })).rejects.toMatchObject({
      statusCode: 400,
      message: expect.stringContaining("store = false"),
    });
    const second = await generateText({ model: openai()("echo-1"), messages, providerOptions: { openai: { store: false } } });
    expect(second.text).toBe("second turn");
  });
});
