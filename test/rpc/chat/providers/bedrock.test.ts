import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";
import { ServiceError } from "../../../../rpc/errors.js";
import { ProviderError } from "../../../../rpc/chat/providers/provider-error.js";
import { http, HttpResponse } from "msw";
import { createBedrockUpstream, eventFrame } from "../../../../mocks/bedrock-upstream.js";
import type { RecordedCall } from "../../../../mocks/scripted-provider.js";
import { mockUpstreams } from "../../../helpers/mock-upstreams.js";
import { TOOL_CONVERSATION, assemble, completionOf, drainStream, providerFor } from "../../../helpers/providers.js";

/** The bedrock adapter against a mock speaking Converse / ConverseStream (docs/providers.md). */

const BASE = "https://bedrock-runtime.eu-west-1.amazonaws.com";
const MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0";
const upstream = createBedrockUpstream(BASE);
const msw = mockUpstreams(...upstream.handlers);
const env = {
  AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
  AWS_SECRET_ACCESS_KEY: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
  AWS_SESSION_TOKEN: "session-token-1",
  AWS_REGION: "us-east-1",
};
const signal = () => new AbortController().signal;
let provider: ReturnType<typeof providerFor>["provider"];

beforeAll(async () => {
  await msw.listen();
  provider = providerFor(
    "sonnet",
    { provider: "bedrock", region: "eu-west-1", baseURL: msw.url(BASE), upstreamModel: MODEL },
    env,
  ).provider;
});
afterAll(() => msw.close());
beforeEach(() => upstream.reset());

/**
 * Recomputes the SigV4 signature of a received request with the same key and time: the
 * request was signed for the loopback URL it was sent to, before the mock restored the
 * provider's own host and path.
 */
async function expectValidSignature(call: RecordedCall, region: string) {
  const sent = new URL(msw.url(BASE));
  const amzDate = call.headers.get("x-amz-date")!;
  const signingDate = new Date(
    `${amzDate.slice(0, 4)}-${amzDate.slice(4, 6)}-${amzDate.slice(6, 8)}T${amzDate.slice(9, 11)}:${amzDate.slice(11, 13)}:${amzDate.slice(13, 15)}Z`,
  );
  const signer = new SignatureV4({
    service: "bedrock",
    region,
    credentials: { accessKeyId: env.AWS_ACCESS_KEY_ID, secretAccessKey: env.AWS_SECRET_ACCESS_KEY, sessionToken: env.AWS_SESSION_TOKEN },
    sha256: Hash.bind(null, "sha256"),
  });
  const expected = await signer.sign(
    {
      method: "POST",
      protocol: sent.protocol,
      hostname: sent.hostname,
      port: Number(sent.port),
      path: sent.pathname + call.url.pathname,
      query: {},
      headers: { host: sent.host, "content-type": call.headers.get("content-type")!, accept: call.headers.get("accept")! },
      body: call.raw,
    },
    { signingDate },
  );
  expect(call.headers.get("authorization")).toBe(expected.headers.authorization);
}

describe("bedrock adapter", () => {
  it("signs a Converse request with SigV4 and translates it and its answer both ways", async () => {
    upstream.script(MODEL, { kind: "turn", turn: { text: "Hello from Bedrock", finish: "length", usage: { input: 11, output: 3 } } });
    const completion = completionOf(
      await provider.complete(
        {
          model: "sonnet",
          messages: [
            { role: "system", content: "Be brief." },
            { role: "user", content: "Hi" },
          ],
          temperature: 0.2,
          top_p: 0.7,
          max_tokens: 50,
          stop: "END",
        },
        signal(),
        { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" },
      ),
    );
    expect(completion).toMatchObject({
      object: "chat.completion",
      choices: [{ index: 0, message: { role: "assistant", content: "Hello from Bedrock" }, finish_reason: "length" }],
      usage: { prompt_tokens: 11, completion_tokens: 3, total_tokens: 14 },
    });
    const [call] = upstream.calls;
    // The model id is one path segment, its ':' escaped.
    expect(call!.url.pathname).toBe("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse");
    expect(call!.headers.get("authorization")).toMatch(
      new RegExp(
        "^AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/\\d{8}/eu-west-1/bedrock/aws4_request, " +
          "SignedHeaders=accept;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=[0-9a-f]{64}$",
      ),
    );
    expect(call!.headers.get("x-amz-security-token")).toBe("session-token-1");
    expect(call!.headers.get("traceparent")).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    await expectValidSignature(call!, "eu-west-1");
    expect(call!.body).toEqual({
      messages: [{ role: "user", content: [{ text: "Hi" }] }],
      system: [{ text: "Be brief." }],
      inferenceConfig: { maxTokens: 50, temperature: 0.2, topP: 0.7, stopSequences: ["END"] },
    });
  });

  it("takes the region from AWS_REGION when the model sets none, and answers 503 without credentials", async () => {
    const fromEnv = providerFor("sonnet", { provider: "bedrock", baseURL: msw.url(BASE), upstreamModel: MODEL }, env).provider;
    await fromEnv.complete({ model: "sonnet", messages: [{ role: "user", content: "x" }] }, signal());
    expect(upstream.calls[0]!.headers.get("authorization")).toContain("/us-east-1/bedrock/aws4_request");
    await expectValidSignature(upstream.calls[0]!, "us-east-1");
    const bare = providerFor("sonnet", { provider: "bedrock", region: "eu-west-1", baseURL: msw.url(BASE) }, {}).provider;
    expect(
      await bare.complete({ model: "sonnet", messages: [{ role: "user", content: "x" }] }, signal()).catch((e: unknown) => e),
    ).toMatchObject({
      status: 503,
      retryable: false,
      message: expect.stringContaining("AWS_ACCESS_KEY_ID"),
    });
  });

  it("decodes a ConverseStream event stream into chunk frames with the usage last", async () => {
    upstream.script(MODEL, { kind: "turn", turn: { text: "one two three", usage: { input: 4, output: 3 } } });
    const { chunks, error } = await drainStream(
      await provider.complete({ model: "sonnet", stream: true, messages: [{ role: "user", content: "count" }] }, signal()),
    );
    expect(error).toBeUndefined();
    expect(upstream.calls[0]!.url.pathname).toBe("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
    await expectValidSignature(upstream.calls[0]!, "eu-west-1");
    expect(chunks[0]!.choices![0]!.delta).toEqual({ role: "assistant", content: "one" });
    expect(assemble(chunks)).toMatchObject({ role: "assistant", content: "one two three", finish: "stop" });
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 4, completion_tokens: 3, total_tokens: 7 } });
  });

  it("translates tools into toolConfig, calls into toolUse and results into toolResult blocks", async () => {
    await provider.complete({ model: "sonnet", ...TOOL_CONVERSATION, tool_choice: "required" }, signal());
    const body = upstream.calls[0]!.body;
    expect(body.system).toEqual([{ text: "Be brief." }]);
    expect(body.toolConfig).toEqual({
      tools: [
        {
          toolSpec: {
            name: "weather",
            description: "Current weather of a city",
            inputSchema: { json: TOOL_CONVERSATION.tools[0]!.function.parameters },
          },
        },
      ],
      toolChoice: { any: {} },
    });
    expect(body.messages).toEqual([
      { role: "user", content: [{ text: "Weather in Paris and Rome?" }] },
      {
        role: "assistant",
        content: [
          { toolUse: { toolUseId: "call_1", name: "weather", input: { city: "Paris" } } },
          { toolUse: { toolUseId: "call_2", name: "weather", input: { city: "Rome" } } },
        ],
      },
      {
        role: "user",
        content: [
          { toolResult: { toolUseId: "call_1", content: [{ text: '{"temp":21}' }] } },
          { toolResult: { toolUseId: "call_2", content: [{ text: "sunny" }] } },
        ],
      },
    ]);
  });

  it("answers a tool history sent without tools: the history's functions are declared in toolConfig, with no tool choice", async () => {
    const { tools: _omitted, ...history } = TOOL_CONVERSATION;
    // Without a toolConfig, Converse (and its mock) answers 400 ValidationException.
    const result = await provider.complete({ model: "sonnet", ...history, tool_choice: "required" }, signal());
    expect(completionOf(result).choices[0]!.finish_reason).toBe("stop");
    expect(upstream.calls[0]!.body.toolConfig).toEqual({
      tools: [
        {
          toolSpec: {
            name: "weather",
            description: "Declared by the gateway for the conversation's earlier calls.",
            inputSchema: { json: { type: "object" } },
          },
        },
      ],
    });
  });

  it("answers toolUse blocks as tool_calls, as JSON and as streamed deltas", async () => {
    const turn = {
      text: "Checking.",
      toolCalls: [
        { id: "tooluse_a", name: "weather", input: { city: "Paris" } },
        { id: "tooluse_b", name: "weather", input: { city: "Rome" } },
      ],
    };
    upstream.script(MODEL, { kind: "turn", turn });
    const completion = completionOf(await provider.complete({ model: "sonnet", ...TOOL_CONVERSATION }, signal()));
    expect(completion.choices[0]).toEqual({
      index: 0,
      finish_reason: "tool_calls",
      message: {
        role: "assistant",
        content: "Checking.",
        tool_calls: [
          { id: "tooluse_a", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
          { id: "tooluse_b", type: "function", function: { name: "weather", arguments: '{"city":"Rome"}' } },
        ],
      },
    });
    const { chunks, error } = await drainStream(await provider.complete({ model: "sonnet", stream: true, ...TOOL_CONVERSATION }, signal()));
    expect(error).toBeUndefined();
    const deltas = chunks.flatMap((chunk) => chunk.choices?.[0]?.delta?.tool_calls ?? []);
    expect(deltas[0]).toEqual({ index: 0, id: "tooluse_a", type: "function", function: { name: "weather", arguments: "" } });
    expect(assemble(chunks)).toMatchObject({
      content: "Checking.",
      finish: "tool_calls",
      toolCalls: [
        { id: "tooluse_a", function: { name: "weather", arguments: '{"city":"Paris"}' } },
        { id: "tooluse_b", function: { name: "weather", arguments: '{"city":"Rome"}' } },
      ],
    });
  });

  it("streams the arguments of a call to a tool without parameters as {}, as in a JSON answer", async () => {
    const turn = {
      toolCalls: [
        { id: "tooluse_now", name: "current_time", input: {} },
        { id: "tooluse_paris", name: "weather", input: { city: "Paris" } },
      ],
    };
    upstream.script(MODEL, { kind: "turn", turn });
    const tools = [{ type: "function" as const, function: { name: "current_time" } }, ...TOOL_CONVERSATION.tools];
    const request = { model: "sonnet", tools, messages: [{ role: "user", content: "Time, and weather in Paris?" }] };
    const expected = [
      { id: "tooluse_now", type: "function", function: { name: "current_time", arguments: "{}" } },
      { id: "tooluse_paris", type: "function", function: { name: "weather", arguments: '{"city":"Paris"}' } },
    ];
    expect(completionOf(await provider.complete(request, signal())).choices[0]!.message.tool_calls).toEqual(expected);
    const { chunks, error } = await drainStream(await provider.complete({ ...request, stream: true }, signal()));
    expect(error).toBeUndefined();
    expect(assemble(chunks)).toMatchObject({ finish: "tool_calls", toolCalls: expected });
  });

  it("relays a 4xx verbatim as not retryable, and marks 429 (with Retry-After) and 503 retryable", async () => {
    const cases: {
      status: number;
      body: { message: string };
      headers: Record<string, string>;
      retryable: boolean;
      retryAfterMs: number | undefined;
    }[] = [
      {
        status: 400,
        body: { message: "Malformed input request" },
        headers: { "x-amzn-errortype": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/" },
        retryable: false,
        retryAfterMs: undefined,
      },
      {
        status: 403,
        body: { message: "You don't have access to the model" },
        headers: { "x-amzn-errortype": "AccessDeniedException" },
        retryable: false,
        retryAfterMs: undefined,
      },
      {
        status: 429,
        body: { message: "Too many requests" },
        headers: { "x-amzn-errortype": "ThrottlingException", "retry-after": "3" },
        retryable: true,
        retryAfterMs: 3000,
      },
      {
        status: 503,
        body: { message: "Service unavailable" },
        headers: { "x-amzn-errortype": "ServiceUnavailableException" },
        retryable: true,
        retryAfterMs: undefined,
      },
    ];
    for (const item of cases) {
      upstream.script(MODEL, { kind: "error", status: item.status, body: item.body, headers: item.headers });
      for (const stream of [false, true]) {
        const error = await provider
          .complete({ model: "sonnet", stream, messages: [{ role: "user", content: "x" }] }, signal())
          .catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ProviderError);
        expect(error).toMatchObject({
          code: "UPSTREAM",
          status: item.status,
          upstreamStatus: item.status,
          upstreamBody: item.body,
          retryable: item.retryable,
          message: item.body.message,
        });
        expect((error as ProviderError).retryAfterMs).toBe(item.retryAfterMs);
      }
    }
  });

  it("reads messages split across reads and several in one read, and ends a stream with an impossible message length with the cut error", async () => {
    const messages = [
      eventFrame("messageStart", { role: "assistant" }),
      eventFrame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: "one" } }),
      eventFrame("contentBlockDelta", { contentBlockIndex: 0, delta: { text: " two" } }),
      eventFrame("messageStop", { stopReason: "end_turn" }),
      eventFrame("metadata", { usage: { inputTokens: 3, outputTokens: 2, totalTokens: 5 } }),
    ];
    const bytes = Buffer.concat(messages);
    // Cut at odd places: inside a length prefix, inside a message, and several messages in one part.
    const parts = [
      bytes.subarray(0, 2),
      bytes.subarray(2, 40),
      bytes.subarray(40, messages[0]!.length + messages[1]!.length + 7),
      bytes.subarray(messages[0]!.length + messages[1]!.length + 7),
    ];
    const streamOf = (chunks: Uint8Array[]) =>
      new HttpResponse(
        new ReadableStream({
          start(controller) {
            for (const chunk of chunks) controller.enqueue(chunk);
            controller.close();
          },
        }),
        { headers: { "content-type": "application/vnd.amazon.eventstream" } },
      );
    msw.use(http.post(`${BASE}/model/:modelId/converse-stream`, () => streamOf(parts)));
    try {
      const whole = await drainStream(
        await provider.complete({ model: "sonnet", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
      );
      expect(whole.error).toBeUndefined();
      expect(assemble(whole.chunks).content).toBe("one two");
      expect(whole.chunks.at(-1)?.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });

      const impossible = Buffer.alloc(8);
      impossible.writeUInt32BE(8, 0);
      msw.use(http.post(`${BASE}/model/:modelId/converse-stream`, () => streamOf([messages[0]!, messages[1]!, impossible])));
      const broken = await drainStream(
        await provider.complete({ model: "sonnet", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
      );
      expect(assemble(broken.chunks).content).toBe("one");
      expect(broken.error).toMatchObject({ code: "BAD_GATEWAY", message: expect.stringContaining("closed the stream early") });
    } finally {
      msw.resetHandlers();
    }
  });

  it("ends a stream cut mid-frame-sequence with the cut error, and turns an exception frame into a retryable 429", async () => {
    upstream.script(MODEL, { kind: "cut", turn: { text: "a b c d" }, after: 3 });
    const cut = await drainStream(
      await provider.complete({ model: "sonnet", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(cut.chunks).content).toBe("a b");
    expect(cut.error).toBeInstanceOf(ServiceError);
    expect(cut.error).toMatchObject({ code: "BAD_GATEWAY", message: expect.stringContaining("closed the stream early") });

    upstream.script(MODEL, { kind: "stream-error", turn: { text: "a b c d" }, after: 2 });
    const failed = await drainStream(
      await provider.complete({ model: "sonnet", stream: true, messages: [{ role: "user", content: "x" }] }, signal()),
    );
    expect(assemble(failed.chunks).content).toBe("a");
    expect(failed.error).toMatchObject({
      code: "UPSTREAM",
      status: 429,
      retryable: true,
      message: expect.stringContaining("Too many requests"),
    });
  });
});
