import Anthropic from "@anthropic-ai/sdk";
import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { Ajv2020 } from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";
import fc from "fast-check";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createAnthropicUpstream } from "../../mocks/anthropic-upstream.js";
import { createBedrockUpstream } from "../../mocks/bedrock-upstream.js";
import { createGeminiUpstream } from "../../mocks/gemini-upstream.js";
import { createOpenAiChatUpstream } from "../../mocks/openai-chat-upstream.js";
import { createOpenAiResponsesUpstream } from "../../mocks/openai-responses-upstream.js";
import { schemaExample } from "../../mocks/schema-example.js";
import { mockUpstreams } from "../helpers/mock-upstreams.js";

/**
 * The provider mocks themselves (mocks/), so the adapter tests can trust them: each honours the
 * structured-output, forced-tool and thinking fields as its provider documents them, answers in
 * the provider's wire format (read here by the providers' own SDKs where there is one: `openai`
 * for chat completions and the Responses API, `@anthropic-ai/sdk` for Messages), and refuses
 * what the provider refuses with the provider's 400.
 */

const OPENAI = "https://api.openai.test/v1";
const RESPONSES = "https://api.responses.test/v1";
const AZURE = "https://mocks-resource.openai.azure.test";
const ANTHROPIC = "https://api.anthropic.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-east-1.amazonaws.com";

const chat = createOpenAiChatUpstream(OPENAI);
const responses = createOpenAiResponsesUpstream(RESPONSES);
const azureResponses = createOpenAiResponsesUpstream(`${AZURE}/openai/v1`);
const anthropic = createAnthropicUpstream(ANTHROPIC);
const gemini = createGeminiUpstream(GEMINI);
const bedrock = createBedrockUpstream(BEDROCK);
const msw = mockUpstreams(
  ...chat.handlers,
  ...responses.handlers,
  ...azureResponses.handlers,
  ...anthropic.handlers,
  ...gemini.handlers,
  ...bedrock.handlers,
);

const ajv = new Ajv2020({ strict: false, allErrors: true });
// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the module.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv2020,
) => void;
addFormats(ajv);
const conforms = (schema: object, value: unknown) => {
  const validate = ajv.compile(schema);
  return validate(value) ? true : validate.errors;
};

/** A strict schema of the kind SDKs send: nested object, array, enum, nullable, a $defs reference. */
const PERSON = {
  type: "object",
  properties: {
    name: { type: "string" },
    age: { type: "integer", minimum: 18 },
    role: { type: "string", enum: ["admin", "user"] },
    nickname: { anyOf: [{ type: "string" }, { type: "null" }] },
    tags: { type: "array", items: { type: "string" } },
    address: { $ref: "#/$defs/address" },
  },
  required: ["name", "age", "role", "nickname", "tags", "address"],
  additionalProperties: false,
  $defs: {
    address: { type: "object", properties: { city: { type: "string" } }, required: ["city"], additionalProperties: false },
  },
};
const PERSON_EXAMPLE = (text: string) => ({ name: text, age: 18, role: "admin", nickname: text, tags: [text], address: { city: text } });
const WEATHER = {
  name: "get_weather",
  description: "Weather of a city",
  input_schema: {
    type: "object" as const,
    properties: { city: { type: "string" }, days: { type: "integer", minimum: 1 } },
    required: ["city"],
  },
};

let openai: OpenAI;
let openaiResponses: OpenAI;
let claude: Anthropic;

beforeAll(async () => {
  await msw.listen();
  openai = new OpenAI({ apiKey: "sk-mock", baseURL: msw.url(OPENAI), maxRetries: 0 });
  openaiResponses = new OpenAI({ apiKey: "sk-mock", baseURL: msw.url(RESPONSES), maxRetries: 0 });
  claude = new Anthropic({ apiKey: "sk-ant-mock", baseURL: msw.url(ANTHROPIC), maxRetries: 0 });
});
afterAll(() => msw.close());
beforeEach(() => {
  for (const mock of [chat, responses, azureResponses, anthropic, gemini, bedrock]) mock.reset();
});

/** An SDK call's rejection: the status and the body the provider sent. */
async function refusal(call: Promise<unknown>): Promise<{ status: number; error: any }> {
  try {
    await call;
  } catch (error) {
    const failure = error as { status?: number; error?: unknown };
    return { status: failure.status ?? 0, error: failure.error };
  }
  throw new Error("the call was not refused");
}

/** A POST of JSON to `path` (query included) below the mocked `base`. */
async function postJson(base: string, path: string, body: unknown): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const res = await fetch(`${msw.url(base)}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Server-sent events as `{event, data}` (data parsed). */
function sseOf(text: string): { event?: string; data: any }[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.trim())
    .map((frame) => {
      const event = /^event: (.*)$/m.exec(frame)?.[1];
      const data = /^data: (.*)$/m.exec(frame)?.[1] ?? "";
      return { event, data: data === "[DONE]" ? data : JSON.parse(data) };
    });
}

/** A response's JSON body. */
async function jsonOf(res: Promise<Response> | Response): Promise<any> {
  return (await res).json();
}

const codec = new EventStreamCodec(toUtf8, fromUtf8);

/** AWS event-stream frames as `{type, payload}`. */
async function eventStreamOf(res: Response): Promise<{ type: string; payload: any }[]> {
  const bytes = new Uint8Array(await res.arrayBuffer());
  const frames: { type: string; payload: any }[] = [];
  for (let offset = 0; offset < bytes.length; ) {
    const length = new DataView(bytes.buffer, bytes.byteOffset + offset).getUint32(0);
    const message = codec.decode(bytes.subarray(offset, offset + length));
    const type = message.headers[":event-type"]?.value ?? message.headers[":exception-type"]?.value;
    frames.push({ type: String(type), payload: JSON.parse(toUtf8(message.body)) });
    offset += length;
  }
  return frames;
}

describe("schemaExample", () => {
  it("builds a value conforming to the schema: every property, strings the text, enum[0], minimum, one item, $ref and anyOf followed", () => {
    const value = schemaExample(PERSON, "Ada");
    expect(value).toEqual(PERSON_EXAMPLE("Ada"));
    expect(conforms(PERSON, value)).toBe(true);
  });

  it("honours const, formats, lengths, ranges, multiples, tuples, allOf, type lists, open objects and definitions", () => {
    const schema = {
      type: "object",
      properties: {
        kind: { const: "fixed" },
        when: { type: "string", format: "date-time" },
        day: { type: "string", format: "date" },
        mail: { type: "string", format: "email" },
        link: { type: "string", format: "uri" },
        id: { type: "string", format: "uuid" },
        short: { type: "string", maxLength: 3 },
        long: { type: "string", minLength: 12 },
        above: { type: "integer", exclusiveMinimum: 5 },
        below: { type: "number", maximum: -2.5 },
        step: { type: "integer", minimum: 7, multipleOf: 5 },
        ratio: { type: "number", exclusiveMinimum: 0, exclusiveMaximum: 1 },
        pair: { type: "array", prefixItems: [{ type: "boolean" }, { type: "integer" }], minItems: 2, items: false },
        three: { type: "array", items: { type: "number" }, minItems: 3 },
        merged: { allOf: [{ type: "object", properties: { a: { type: "string" } } }, { properties: { b: { type: "boolean" } } }] },
        either: { type: ["null", "integer"] },
        open: { type: "object" },
        map: { type: "object", additionalProperties: { type: "integer" } },
        closed: { type: "object", additionalProperties: false },
        legacy: { $ref: "#/definitions/legacy" },
      },
      definitions: { legacy: { type: "boolean" } },
    };
    const value = schemaExample(schema, "hello world") as Record<string, unknown>;
    expect(conforms(schema, value)).toBe(true);
    expect(value).toMatchObject({
      kind: "fixed",
      short: "hel",
      above: 6,
      below: -2.5,
      step: 10,
      pair: [false, 0],
      three: [0, 0, 0],
      merged: { a: "hello world", b: false },
      either: 0,
      open: { text: "hello world" },
      map: { text: 0 },
      closed: {},
      legacy: false,
    });
    expect(value.ratio).toBeGreaterThan(0);
    expect(value.ratio).toBeLessThan(1);
  });

  it("reads Gemini's OpenAPI subset (upper-case types, nullable) and ends a recursive schema", () => {
    expect(
      schemaExample(
        {
          type: "OBJECT",
          properties: {
            title: { type: "STRING", nullable: true },
            score: { type: "NUMBER" },
            items: { type: "ARRAY", items: { type: "BOOLEAN" } },
          },
        },
        "t",
      ),
    ).toEqual({ title: "t", score: 0, items: [false] });
    const tree = {
      type: "object",
      properties: { label: { type: "string" }, children: { type: "array", items: { $ref: "#" } } },
      required: ["label", "children"],
    };
    const value = schemaExample(tree, "node");
    expect(conforms(tree, value)).toBe(true);
    expect(JSON.stringify(value).length).toBeLessThan(2000);
  });

  it("conforms whatever the text", () => {
    const validate = ajv.compile(PERSON);
    fc.assert(fc.property(fc.string(), (text) => validate(schemaExample(PERSON, text)) === true));
  });
});

describe("chat completions mock (openai-compatible, azure-openai)", () => {
  const format = { type: "json_schema" as const, json_schema: { name: "person", schema: PERSON, strict: true } };

  it("answers a json_schema response_format with JSON of the schema, as JSON and streamed", async () => {
    const parsed = await openai.chat.completions.parse({
      model: "gpt-mock",
      messages: [{ role: "user", content: "Grace" }],
      response_format: format,
    });
    expect(parsed.choices[0]!.message.parsed).toEqual(PERSON_EXAMPLE("Grace"));
    expect(parsed.choices[0]!.finish_reason).toBe("stop");
    const stream = await openai.chat.completions.create({
      model: "gpt-mock",
      messages: [{ role: "user", content: "Grace Hopper" }],
      response_format: format,
      stream: true,
    });
    const deltas: string[] = [];
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) deltas.push(chunk.choices[0].delta.content);
    expect(deltas.length).toBeGreaterThan(1);
    expect(JSON.parse(deltas.join(""))).toEqual(PERSON_EXAMPLE("Grace Hopper"));
  });

  it("answers json_object with a JSON object, and refuses it as OpenAI does when no message says json", async () => {
    const answer = await openai.chat.completions.create({
      model: "gpt-mock",
      messages: [
        { role: "system", content: "Reply in JSON." },
        { role: "user", content: "hi there" },
      ],
      response_format: { type: "json_object" },
    });
    expect(JSON.parse(answer.choices[0]!.message.content!)).toEqual({ text: "hi there" });
    const refused = await refusal(
      openai.chat.completions.create({
        model: "gpt-mock",
        messages: [{ role: "user", content: "hi" }],
        response_format: { type: "json_object" },
      }),
    );
    expect(refused).toEqual({
      status: 400,
      error: {
        message: "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.",
        type: "invalid_request_error",
        param: "messages",
        code: null,
      },
    });
  });

  it("refuses a strict schema outside the Structured Outputs subset, naming where", async () => {
    const loose = {
      type: "object",
      properties: { a: { type: "object", properties: { b: { type: "string" } }, required: ["b"] } },
      required: ["a"],
      additionalProperties: false,
    };
    const refused = await refusal(
      openai.chat.completions.create({
        model: "gpt-mock",
        messages: [{ role: "user", content: "x" }],
        response_format: { type: "json_schema", json_schema: { name: "loose", schema: loose, strict: true } },
      }),
    );
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({
      message:
        "Invalid schema for response_format 'loose': In context=('properties', 'a'), 'additionalProperties' is required to be supplied and to be false.",
      code: "invalid_json_schema",
    });
    // Not strict: the schema is taken as it is.
    const lenient = await openai.chat.completions.create({
      model: "gpt-mock",
      messages: [{ role: "user", content: "x" }],
      response_format: { type: "json_schema", json_schema: { name: "loose", schema: loose } },
    });
    expect(JSON.parse(lenient.choices[0]!.message.content!)).toEqual({ a: { b: "x" } });
  });

  it("leaves a scripted model's answer as scripted", async () => {
    chat.script("gpt-scripted", { kind: "turn", turn: { text: '{"name":"scripted"}' } });
    const answer = await openai.chat.completions.create({
      model: "gpt-scripted",
      messages: [{ role: "user", content: "x" }],
      response_format: format,
    });
    expect(answer.choices[0]!.message.content).toBe('{"name":"scripted"}');
  });
});

describe("Anthropic Messages mock", () => {
  it("answers output_config.format with JSON of the schema, as a message and streamed", async () => {
    const message = await claude.messages.create({
      model: "claude-mock",
      max_tokens: 256,
      messages: [{ role: "user", content: "Alan" }],
      output_config: { format: { type: "json_schema", schema: PERSON } },
    });
    expect(message.content).toEqual([{ type: "text", text: JSON.stringify(PERSON_EXAMPLE("Alan")) }]);
    expect(message.stop_reason).toBe("end_turn");
    const streamed = await claude.messages
      .stream({
        model: "claude-mock",
        max_tokens: 256,
        messages: [{ role: "user", content: "Alan Turing" }],
        output_config: { format: { type: "json_schema", schema: PERSON } },
      })
      .finalMessage();
    expect(JSON.parse((streamed.content[0] as Anthropic.TextBlock).text)).toEqual(PERSON_EXAMPLE("Alan Turing"));
  });

  it("answers a forced tool with a tool_use of that tool whose input fits its input_schema; any: the first tool", async () => {
    const tools = [{ name: "other", input_schema: { type: "object" as const, properties: {} } }, WEATHER];
    const forced = await claude.messages.create({
      model: "claude-mock",
      max_tokens: 256,
      messages: [{ role: "user", content: "Paris" }],
      tools,
      tool_choice: { type: "tool", name: "get_weather" },
    });
    expect(forced.stop_reason).toBe("tool_use");
    expect(forced.content).toEqual([
      { type: "tool_use", id: expect.stringMatching(/^toolu_/), name: "get_weather", input: { city: "Paris", days: 1 } },
    ]);
    const streamed = await claude.messages
      .stream({
        model: "claude-mock",
        max_tokens: 256,
        messages: [{ role: "user", content: "Rome" }],
        tools,
        tool_choice: { type: "tool", name: "get_weather" },
      })
      .finalMessage();
    expect(streamed.content).toMatchObject([{ type: "tool_use", name: "get_weather", input: { city: "Rome", days: 1 } }]);
    const any = await claude.messages.create({
      model: "claude-mock",
      max_tokens: 256,
      messages: [{ role: "user", content: "x" }],
      tools,
      tool_choice: { type: "any" },
    });
    expect(any.content).toMatchObject([{ type: "tool_use", name: "other", input: {} }]);
  });

  it("thinks when asked: a signed thinking block before the answer, its tokens in output_tokens_details", async () => {
    const params = {
      model: "claude-mock",
      max_tokens: 4096,
      // The newest clients put system turns among the messages.
      messages: [
        { role: "system" as const, content: "Be brief." },
        { role: "user" as const, content: "Say hi" },
      ],
      thinking: { type: "enabled" as const, budget_tokens: 2048 },
    };
    const message = await claude.messages.create(params);
    expect(message.content).toEqual([
      { type: "thinking", thinking: "Thinking about: Say hi", signature: expect.any(String) },
      { type: "text", text: "Say hi" },
    ]);
    // Thinking counts in output_tokens: 2 words of answer, 4 of thinking.
    expect(message.usage).toMatchObject({ output_tokens: 6, output_tokens_details: { thinking_tokens: 4 } });
    const streamed = await claude.messages.stream(params).finalMessage();
    expect(streamed.content).toEqual([
      { type: "thinking", thinking: "Thinking about: Say hi", signature: expect.stringMatching(/.+/) },
      { type: "text", text: "Say hi" },
    ]);
    expect(streamed.usage).toMatchObject({ output_tokens: 6, output_tokens_details: { thinking_tokens: 4 } });
  });

  it("refuses what the Messages API refuses, in its error envelope", async () => {
    const base = { model: "claude-mock", max_tokens: 2048, messages: [{ role: "user" as const, content: "x" }] };
    const cases: [Record<string, unknown>, string][] = [
      [
        { thinking: { type: "enabled", budget_tokens: 1000 } },
        "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
      ],
      [{ thinking: { type: "enabled", budget_tokens: 2048 } }, "`max_tokens` must be greater than `thinking.budget_tokens`."],
      [
        { max_tokens: 4096, thinking: { type: "enabled", budget_tokens: 2048 }, tools: [WEATHER], tool_choice: { type: "any" } },
        "Thinking may not be enabled when tool_choice forces tool use.",
      ],
      [{ messages: [{ role: "tool", content: "x" }] }, "messages.0.role: Input should be 'user', 'assistant' or 'system'"],
      [
        { output_config: { format: { type: "json_schema", schema: { type: "object", properties: { a: { type: "string" } } } } } },
        "output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false",
      ],
    ];
    for (const [fields, message] of cases) {
      const refused = await refusal(claude.messages.create({ ...base, ...fields } as Anthropic.MessageCreateParamsNonStreaming));
      expect(refused, message).toEqual({ status: 400, error: { type: "error", error: { type: "invalid_request_error", message } } });
    }
  });
});

describe("Gemini mock", () => {
  const generate = (model: string, body: unknown, stream = false) =>
    postJson(GEMINI, `/models/${model}:${stream ? "streamGenerateContent?alt=sse" : "generateContent"}`, body);

  it("answers responseMimeType application/json with JSON of responseJsonSchema (or responseSchema), as JSON and streamed", async () => {
    const contents = [{ role: "user", parts: [{ text: "Ada" }] }];
    const json = await generate("gemini-mock", {
      contents,
      generationConfig: { responseMimeType: "application/json", responseJsonSchema: PERSON },
    });
    expect(JSON.parse(json.json.candidates[0].content.parts[0].text)).toEqual(PERSON_EXAMPLE("Ada"));
    const openapi = await generate("gemini-mock", {
      contents,
      generationConfig: {
        responseMimeType: "application/json",
        responseSchema: { type: "OBJECT", properties: { n: { type: "INTEGER" } } },
      },
    });
    expect(JSON.parse(openapi.json.candidates[0].content.parts[0].text)).toEqual({ n: 0 });
    const streamed = await generate("gemini-mock", { contents, generationConfig: { responseMimeType: "application/json" } }, true);
    const text = sseOf(streamed.text)
      .flatMap((event) => event.data.candidates[0].content.parts)
      .map((part: any) => part.text)
      .join("");
    expect(JSON.parse(text)).toEqual({ text: "Ada" });
  });

  it("thinks with a thinkingConfig: thoughtsTokenCount, and thought parts first only with includeThoughts", async () => {
    const contents = [{ role: "user", parts: [{ text: "hello" }] }];
    const shown = await generate("gemini-mock", {
      contents,
      generationConfig: { thinkingConfig: { thinkingBudget: 1024, includeThoughts: true } },
    });
    expect(shown.json.candidates[0].content.parts).toEqual([{ text: "Thinking about: hello", thought: true }, { text: "hello" }]);
    expect(shown.json.usageMetadata).toMatchObject({ candidatesTokenCount: 1, thoughtsTokenCount: 3, totalTokenCount: 14 });
    const hidden = await generate("gemini-mock", { contents, generationConfig: { thinkingConfig: { thinkingBudget: 1024 } } });
    expect(hidden.json.candidates[0].content.parts).toEqual([{ text: "hello" }]);
    expect(hidden.json.usageMetadata.thoughtsTokenCount).toBe(3);
    const off = await generate("gemini-mock", { contents, generationConfig: { thinkingConfig: { thinkingBudget: 0 } } });
    expect(off.json.usageMetadata.thoughtsTokenCount).toBeUndefined();
    const streamed = await generate("gemini-mock", { contents, generationConfig: { thinkingConfig: { includeThoughts: true } } }, true);
    const parts = sseOf(streamed.text).flatMap((event) => event.data.candidates[0].content.parts);
    expect(parts.slice(0, 4)).toEqual([
      { text: "Thinking", thought: true },
      { text: " about:", thought: true },
      { text: " hello", thought: true },
      { text: "hello" },
    ]);
  });
});

describe("Bedrock Converse mock", () => {
  const MODEL = "anthropic.claude-mock-v1:0";
  const converse = (body: unknown, stream = false, model = MODEL) =>
    fetch(msw.url(`${BEDROCK}/model/${encodeURIComponent(model)}/${stream ? "converse-stream" : "converse"}`), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const messages = [{ role: "user", content: [{ text: "Ada" }] }];
  const textFormat = { type: "json_schema", structure: { jsonSchema: { name: "person", schema: JSON.stringify(PERSON) } } };
  const toolConfig = (toolChoice: unknown) => ({
    tools: [
      { toolSpec: { name: "noop", inputSchema: { json: { type: "object" } } } },
      { toolSpec: { name: WEATHER.name, inputSchema: { json: WEATHER.input_schema } } },
    ],
    toolChoice,
  });

  it("answers outputConfig.textFormat with JSON of the schema (given as a string), as JSON and streamed", async () => {
    const json = await jsonOf(converse({ messages, outputConfig: { textFormat } }));
    expect(JSON.parse(json.output.message.content[0].text)).toEqual(PERSON_EXAMPLE("Ada"));
    const frames = await eventStreamOf(await converse({ messages, outputConfig: { textFormat } }, true));
    const text = frames.map((frame) => frame.payload.delta?.text ?? "").join("");
    expect(JSON.parse(text)).toEqual(PERSON_EXAMPLE("Ada"));
  });

  it("answers a forced tool (by name, or any: the first) with a toolUse whose input fits its schema", async () => {
    const named = await jsonOf(converse({ messages, toolConfig: toolConfig({ tool: { name: "get_weather" } }) }));
    expect(named.stopReason).toBe("tool_use");
    expect(named.output.message.content).toEqual([
      { toolUse: { toolUseId: expect.stringMatching(/^tooluse_/), name: "get_weather", input: { city: "Ada", days: 1 } } },
    ]);
    const any = await jsonOf(converse({ messages, toolConfig: toolConfig({ any: {} }) }));
    expect(any.output.message.content[0].toolUse).toMatchObject({ name: "noop", input: { text: "Ada" } });
    const frames = await eventStreamOf(await converse({ messages, toolConfig: toolConfig({ tool: { name: "get_weather" } }) }, true));
    expect(frames.find((frame) => frame.type === "contentBlockStart")?.payload.start.toolUse.name).toBe("get_weather");
    const input = frames.map((frame) => frame.payload.delta?.toolUse?.input ?? "").join("");
    expect(JSON.parse(input)).toEqual({ city: "Ada", days: 1 });
  });

  it("thinks with additionalModelRequestFields.thinking: a reasoningContent block first, streamed as reasoning deltas and a signature", async () => {
    const body = {
      messages,
      inferenceConfig: { maxTokens: 4096 },
      additionalModelRequestFields: { thinking: { type: "enabled", budget_tokens: 1024 } },
    };
    const json = await jsonOf(converse(body));
    expect(json.output.message.content).toEqual([
      { reasoningContent: { reasoningText: { text: "Thinking about: Ada", signature: expect.any(String) } } },
      { text: "Ada" },
    ]);
    expect(json.usage).toMatchObject({ inputTokens: 10, outputTokens: 4 });
    const frames = await eventStreamOf(await converse(body, true));
    const reasoning = frames.filter((frame) => frame.payload.delta?.reasoningContent).map((frame) => frame.payload.delta.reasoningContent);
    expect(reasoning.map((delta) => delta.text ?? "").join("")).toBe("Thinking about: Ada");
    expect(reasoning.at(-1)).toEqual({ signature: expect.any(String) });
    expect(frames.filter((frame) => frame.payload.delta?.text).every((frame) => frame.payload.contentBlockIndex === 1)).toBe(true);
  });

  it("refuses a schema that is not a JSON string, and on Anthropic models what the Messages API refuses", async () => {
    const object = await converse({
      messages,
      outputConfig: { textFormat: { ...textFormat, structure: { jsonSchema: { schema: PERSON } } } },
    });
    expect(object.status).toBe(400);
    expect(object.headers.get("x-amzn-errortype")).toBe("ValidationException");
    const forced = await converse({
      messages,
      toolConfig: toolConfig({ any: {} }),
      inferenceConfig: { maxTokens: 4096 },
      additionalModelRequestFields: { thinking: { type: "enabled", budget_tokens: 1024 } },
    });
    expect(forced.status).toBe(400);
    expect(await jsonOf(forced)).toEqual({
      message: "The model returned the following errors: Thinking may not be enabled when tool_choice forces tool use.",
    });
    const budget = await converse({
      messages,
      inferenceConfig: { maxTokens: 1024 },
      additionalModelRequestFields: { thinking: { type: "enabled", budget_tokens: 1024 } },
    });
    expect((await jsonOf(budget)).message).toBe(
      "The model returned the following errors: `max_tokens` must be greater than `thinking.budget_tokens`.",
    );
  });
});

describe("OpenAI Responses mock", () => {
  it("answers a response object the SDK reads: a message with output_text, usage with its details; Azure's v1 path too", async () => {
    responses.script("gpt-usage", {
      kind: "turn",
      turn: { text: "Hello there", usage: { input: 12, output: 2, cacheRead: 6, thoughts: 3 } },
    });
    const response = await openaiResponses.responses.create({ model: "gpt-usage", input: "hi", store: false });
    expect(response).toMatchObject({
      object: "response",
      status: "completed",
      output: [
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: "Hello there", annotations: [] }],
        },
      ],
      usage: {
        input_tokens: 18,
        input_tokens_details: { cached_tokens: 6 },
        output_tokens: 5,
        output_tokens_details: { reasoning_tokens: 3 },
        total_tokens: 23,
      },
    });
    expect(response.output_text).toBe("Hello there");
    const azure = new OpenAI({ apiKey: "azure-key", baseURL: msw.url(`${AZURE}/openai/v1`), maxRetries: 0 });
    const echoed = await azure.responses.create({
      model: "gpt-4o-deployment",
      input: [{ role: "user", content: [{ type: "input_text", text: "from Azure" }] }],
    });
    expect(echoed.output_text).toBe("from Azure");
    expect(azureResponses.calls[0]!.url.pathname).toBe("/openai/v1/responses");
  });

  it("honours text.format json_schema (responses.parse) and json_object", async () => {
    const parsed = await openaiResponses.responses.parse({
      model: "gpt-mock",
      input: [{ role: "user", content: "Linus" }],
      text: { format: { type: "json_schema", name: "person", schema: PERSON, strict: true } },
    });
    expect(parsed.output_parsed).toEqual(PERSON_EXAMPLE("Linus"));
    const object = await openaiResponses.responses.create({
      model: "gpt-mock",
      input: [{ role: "user", content: "Answer in JSON: hi" }],
      text: { format: { type: "json_object" } },
    });
    expect(JSON.parse(object.output_text)).toEqual({ text: "Answer in JSON: hi" });
  });

  it("streams the typed events in order, each with its sequence_number, ending with response.completed and its usage", async () => {
    const res = await postJson(RESPONSES, "/responses", { model: "gpt-mock", input: "one two three", stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events = sseOf(res.text);
    expect(events.every((event) => event.event === event.data.type)).toBe(true);
    expect(events.map((event) => event.data.sequence_number)).toEqual(events.map((_, index) => index));
    expect(events.map((event) => event.data.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[0]!.data.response).toMatchObject({ status: "in_progress", output: [], usage: null });
    expect(events.at(-1)!.data.response).toMatchObject({ status: "completed", usage: { input_tokens: 10, output_tokens: 3 } });
    const final = await openaiResponses.responses.stream({ model: "gpt-mock", input: "one two three" }).finalResponse();
    expect(final.output_text).toBe("one two three");
  });

  it("reasons when reasoning.effort is set: a reasoning item (its summary_text only when a summary is asked for), reasoning tokens counted", async () => {
    const silent = await openaiResponses.responses.create({ model: "gpt-mock", input: "why", reasoning: { effort: "low" } });
    expect(silent.output[0]).toMatchObject({ type: "reasoning", summary: [] });
    expect(silent.usage?.output_tokens_details.reasoning_tokens).toBe(3);
    const summarised = await openaiResponses.responses.create({
      model: "gpt-mock",
      input: "why",
      reasoning: { effort: "low", summary: "auto" },
    });
    expect(summarised.output[0]).toMatchObject({ type: "reasoning", summary: [{ type: "summary_text", text: "Thinking about: why" }] });
    expect(summarised.output_text).toBe("why");
    const none = await openaiResponses.responses.create({ model: "gpt-mock", input: "why", reasoning: { effort: "none" } });
    expect(none.output.map((item) => item.type)).toEqual(["message"]);
    const res = await postJson(RESPONSES, "/responses", {
      model: "gpt-mock",
      input: "why",
      reasoning: { effort: "low", summary: "auto" },
      stream: true,
    });
    const types = sseOf(res.text).map((event) => event.data.type);
    expect(types.slice(2, 9)).toEqual([
      "response.output_item.added",
      "response.reasoning_summary_part.added",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.delta",
      "response.reasoning_summary_text.done",
      "response.reasoning_summary_part.done",
    ]);
    const final = await openaiResponses.responses
      .stream({ model: "gpt-mock", input: "why", reasoning: { effort: "low", summary: "auto" } })
      .finalResponse();
    expect(final.output[0]).toMatchObject({ type: "reasoning", summary: [{ text: "Thinking about: why" }] });
  });

  it("calls functions: a forced tool_choice answered with an example of its parameters, a namespaced call with its namespace, arguments streamed", async () => {
    const tools: OpenAI.Responses.Tool[] = [
      { type: "function", name: "get_weather", parameters: WEATHER.input_schema, strict: false },
      {
        type: "namespace",
        name: "crm",
        description: "CRM",
        tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: { id: { type: "string" } } } }],
      },
    ];
    const forced = await openaiResponses.responses.create({
      model: "gpt-mock",
      input: "Oslo",
      tools,
      tool_choice: { type: "function", name: "get_weather" },
    });
    expect(forced.output).toEqual([
      {
        id: expect.any(String),
        type: "function_call",
        status: "completed",
        call_id: expect.any(String),
        name: "get_weather",
        arguments: '{"city":"Oslo","days":1}',
      },
    ]);
    responses.script("gpt-tools", { kind: "turn", turn: { toolCalls: [{ id: "call_1", name: "lookup", input: { id: "42" } }] } });
    const namespaced = await openaiResponses.responses.create({ model: "gpt-tools", input: "find 42", tools });
    expect(namespaced.output[0]).toMatchObject({
      type: "function_call",
      call_id: "call_1",
      name: "lookup",
      namespace: "crm",
      arguments: '{"id":"42"}',
    });
    const res = await postJson(RESPONSES, "/responses", { model: "gpt-tools", input: "find 42", tools, stream: true });
    const events = sseOf(res.text).map((event) => event.data);
    expect(events.map((event) => event.type).slice(2)).toEqual([
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[2].item).toMatchObject({ type: "function_call", status: "in_progress", arguments: "", name: "lookup", namespace: "crm" });
    expect(events[5]).toMatchObject({ name: "lookup", arguments: '{"id":"42"}' });
    // The call's output goes back with the call: the next turn is taken.
    const next = await openaiResponses.responses.create({
      model: "gpt-mock",
      tools,
      input: [
        { role: "user", content: "find 42" },
        {
          type: "function_call",
          call_id: "call_1",
          name: "lookup",
          namespace: "crm",
          arguments: '{"id":"42"}',
        } as OpenAI.Responses.ResponseInputItem,
        { type: "function_call_output", call_id: "call_1", output: "found" },
      ],
    });
    expect(next.output_text).toBe("find 42");
  });

  it("stops at max_output_tokens: status incomplete, reason max_output_tokens, as JSON and streamed", async () => {
    const input = Array.from({ length: 30 }, (_, index) => `w${index}`).join(" ");
    const cut = await openaiResponses.responses.create({ model: "gpt-mock", input, max_output_tokens: 16 });
    expect(cut).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, usage: { output_tokens: 16 } });
    expect(cut.output_text).toBe(input.split(" ").slice(0, 16).join(" "));
    const res = await postJson(RESPONSES, "/responses", { model: "gpt-mock", input, max_output_tokens: 16, stream: true });
    const last = sseOf(res.text).at(-1)!.data;
    expect(last).toMatchObject({
      type: "response.incomplete",
      response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } },
    });
  });

  it("ends a stream with response.failed on a scripted in-stream error", async () => {
    responses.script("gpt-fails", { kind: "stream-error", turn: { text: "a b c" }, after: 4 });
    const res = await postJson(RESPONSES, "/responses", { model: "gpt-fails", input: "x", stream: true });
    const events = sseOf(res.text).map((event) => event.data);
    expect(events.map((event) => event.sequence_number)).toEqual([0, 1, 2, 3, 4]);
    expect(events.at(-1)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error" } } });
  });

  it("refuses what the Responses API refuses, in OpenAI's error envelope", async () => {
    const cases: [Record<string, unknown>, { message: string; param: string | null; code: string | null }][] = [
      [{ max_tokens: 50 }, { message: "Unknown parameter: 'max_tokens'.", param: "max_tokens", code: "unknown_parameter" }],
      [{ messages: [] }, { message: "Unknown parameter: 'messages'.", param: "messages", code: "unknown_parameter" }],
      [
        { response_format: { type: "json_object" } },
        {
          message: expect.stringMatching(
            /^Unsupported parameter: 'response_format'\. In the Responses API, this parameter has moved to 'text\.format'\./,
          ),
          param: "response_format",
          code: "unsupported_parameter",
        },
      ],
      [
        { max_output_tokens: 8 },
        {
          message: "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 8 instead.",
          param: "max_output_tokens",
          code: "integer_below_min_value",
        },
      ],
      [
        { instructions: "Answer in JSON.", text: { format: { type: "json_object" } } },
        {
          message: "Response input messages must contain the word 'json' in some form to use 'text.format' of type 'json_object'.",
          param: "text.format",
          code: null,
        },
      ],
      [
        {
          text: {
            format: {
              type: "json_schema",
              name: "p",
              strict: true,
              schema: { type: "object", properties: { a: { type: "string" } }, additionalProperties: false },
            },
          },
        },
        {
          message:
            "Invalid schema for response_format 'p': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'a'.",
          param: "text.format.schema",
          code: "invalid_json_schema",
        },
      ],
      [
        { tools: [{ type: "function", function: { name: "chat_shaped" } }] },
        { message: "Missing required parameter: 'tools[0].name'.", param: "tools[0].name", code: "missing_required_parameter" },
      ],
      [
        { input: [{ type: "function_call_output", call_id: "call_lost", output: "x" }] },
        { message: "No tool call found for function call output with call_id call_lost.", param: "input", code: null },
      ],
    ];
    for (const [fields, error] of cases) {
      const refused = await refusal(openaiResponses.responses.create({ model: "gpt-mock", input: "hi", ...fields } as never));
      expect(refused, JSON.stringify(fields)).toEqual({ status: 400, error: { ...error, type: "invalid_request_error" } });
    }
  });
});
