import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { http, HttpResponse, type HttpHandler } from "msw";
import { jsonAnswer, toolInput } from "./schema-example.js";
import { frameStream, reasoningOf, scripted, usageOf, wordsOf, type MockTurn, type ScriptedProvider } from "./scripted-provider.js";

/**
 * msw handlers for Amazon Bedrock's Converse API in its documented wire format:
 * `POST <endpoint>/model/<modelId>/converse` answers a `ConverseResponse`; `/converse-stream`
 * answers AWS's binary event stream (`application/vnd.amazon.eventstream`): `messageStart`,
 * `contentBlockStart` (tool use), `contentBlockDelta` (`text`, `toolUse.input`),
 * `contentBlockStop`, `messageStop`, `metadata` (usage), and exception frames
 * (`:message-type: exception`). Requests are recorded (signature headers included); answers
 * are scripted per model id.
 *
 * With `outputConfig.textFormat` (`json_schema`, the schema a JSON string in
 * `structure.jsonSchema.schema`) an unscripted model answers JSON of the schema
 * (mocks/schema-example.ts); a forced tool (`toolConfig.toolChoice` `{tool: {name}}`, or `{any:
 * {}}`: the first tool) is answered with a `toolUse` of that tool whose input is an example of
 * its `inputSchema.json`; `additionalModelRequestFields.thinking` (`enabled`, `adaptive`) puts a
 * `reasoningContent` block (`reasoningText` with its signature) before the answer, streamed as
 * `reasoningContent` text deltas then its signature. Converse counts reasoning in
 * `outputTokens`. Refused with a `ValidationException`: a schema that is not a JSON string, and
 * on Anthropic models what the Messages API refuses (a thinking budget under 1024 or not under
 * `maxTokens`, thinking with a forced tool), in Converse's wrapping of the model's message.
 */
const codec = new EventStreamCodec(toUtf8, fromUtf8);

export function eventFrame(eventType: string, payload: unknown, messageType: "event" | "exception" = "event"): Uint8Array {
  return codec.encode({
    headers: {
      ":message-type": { type: "string", value: messageType },
      [messageType === "event" ? ":event-type" : ":exception-type"]: { type: "string", value: eventType },
      ":content-type": { type: "string", value: "application/json" },
    },
    body: fromUtf8(JSON.stringify(payload)),
  });
}

export function createBedrockUpstream(baseURL: string): ScriptedProvider & { handlers: HttpHandler[] } {
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/model/:modelId/:operation`, async ({ request, params }) => {
    const body = provider.record(request, await request.text());
    const model = decodeURIComponent(String(params.modelId));
    const operation = String(params.operation);
    if (operation !== "converse" && operation !== "converse-stream")
      return HttpResponse.json({ message: "Unknown operation" }, { status: 404 });
    // Converse refuses toolUse / toolResult blocks in a request without a toolConfig.
    const toolBlocks = (body?.messages ?? []).some((message: any) =>
      (message.content ?? []).some((block: any) => block.toolUse || block.toolResult),
    );
    if (toolBlocks && !body?.toolConfig?.tools?.length)
      return HttpResponse.json(
        { message: "The toolConfig field must be defined when using toolUse and toolResult content blocks." },
        { status: 400, headers: { "x-amzn-errortype": "ValidationException" } },
      );
    const refused = badRequest(body, model);
    if (refused) return refused;
    const lastUser = [...(body?.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const echo = (lastUser?.content ?? []).map((block: any) => block.text ?? "").join("");
    const behaviour = provider.behaviour(model, body, echo, () => unscriptedTurn(body, echo, provider.calls.length));
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const type = body?.additionalModelRequestFields?.thinking?.type;
    const reasoning = type === "enabled" || type === "adaptive" ? reasoningOf(turn, echo) : undefined;
    const signature = Buffer.from(`mock-signature:${model}:${provider.calls.length}`).toString("base64");
    const usage = usageOf(turn, reasoning);
    const stopReason = turn.toolCalls?.length ? "tool_use" : turn.finish === "length" ? "max_tokens" : "end_turn";
    const outputTokens = usage.output + usage.thoughts;
    const tokenUsage = {
      inputTokens: usage.input,
      outputTokens,
      totalTokens: usage.input + usage.cacheRead + usage.cacheWrite + outputTokens,
      ...(usage.cacheRead ? { cacheReadInputTokens: usage.cacheRead } : {}),
      ...(usage.cacheWrite ? { cacheWriteInputTokens: usage.cacheWrite } : {}),
    };
    if (operation === "converse") {
      return HttpResponse.json({
        output: {
          message: {
            role: "assistant",
            content: [
              ...(reasoning !== undefined ? [{ reasoningContent: { reasoningText: { text: reasoning, signature } } }] : []),
              ...contentOf(turn),
            ],
          },
        },
        stopReason,
        usage: tokenUsage,
        metrics: { latencyMs: 12 },
      });
    }
    const frames = [eventFrame("messageStart", { role: "assistant" })];
    let index = 0;
    if (reasoning !== undefined) {
      for (const word of wordsOf(reasoning))
        frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { text: word } } }));
      frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { reasoningContent: { signature } } }));
      frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index }));
      index++;
    }
    if (turn.text !== undefined) {
      for (const word of wordsOf(turn.text))
        frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { text: word } }));
      frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index }));
      index++;
    }
    for (const call of turn.toolCalls ?? []) {
      frames.push(
        eventFrame("contentBlockStart", { contentBlockIndex: index, start: { toolUse: { toolUseId: call.id, name: call.name } } }),
      );
      // A call without input streams none.
      const json = Object.keys(call.input).length ? JSON.stringify(call.input) : "";
      const half = Math.floor(json.length / 2);
      for (const part of json ? [json.slice(0, half), json.slice(half)] : [])
        frames.push(eventFrame("contentBlockDelta", { contentBlockIndex: index, delta: { toolUse: { input: part } } }));
      frames.push(eventFrame("contentBlockStop", { contentBlockIndex: index }));
      index++;
    }
    frames.push(eventFrame("messageStop", { stopReason }));
    frames.push(eventFrame("metadata", { usage: tokenUsage, metrics: { latencyMs: 12 } }));
    if (behaviour.kind === "stream-error") {
      frames.splice(
        behaviour.after,
        frames.length,
        eventFrame("throttlingException", { message: "Too many requests, please wait before trying again." }, "exception"),
      );
    }
    return frameStream(frames, "application/vnd.amazon.eventstream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

function contentOf(turn: MockTurn): unknown[] {
  const content: unknown[] = [];
  if (turn.text !== undefined) content.push({ text: turn.text });
  for (const call of turn.toolCalls ?? []) content.push({ toolUse: { toolUseId: call.id, name: call.name, input: call.input } });
  return content;
}

/** The tool a `toolChoice` forces: the named one, or for `any` the first. */
function forcedTool(body: any): { name: string; inputSchema?: { json?: unknown } } | undefined {
  const specs = (body?.toolConfig?.tools ?? []).map((tool: any) => tool?.toolSpec).filter((spec: any) => typeof spec?.name === "string");
  const choice = body?.toolConfig?.toolChoice;
  if (choice?.tool) return specs.find((spec: any) => spec.name === choice.tool.name);
  if (choice?.any) return specs[0];
  return undefined;
}

/** An unscripted model's turn: the forced tool's call, JSON of the text format's schema, or the echoed text. */
function unscriptedTurn(body: any, echo: string, call: number): MockTurn {
  const tool = forcedTool(body);
  if (tool) {
    return { toolCalls: [{ id: `tooluse_mock${call}_0`, name: tool.name, input: toolInput(tool.inputSchema?.json, echo) }] };
  }
  const format = body?.outputConfig?.textFormat;
  if (format?.type === "json_schema") return { text: jsonAnswer(JSON.parse(format.structure.jsonSchema.schema), echo) };
  return { text: echo };
}

function validation(message: string): HttpResponse<any> {
  return HttpResponse.json({ message }, { status: 400, headers: { "x-amzn-errortype": "ValidationException" } });
}

const ANTHROPIC_MODEL = /(^|[.:/])anthropic\.claude/;

/** Converse's 400 for a request it does not take. */
function badRequest(body: any, model: string): HttpResponse<any> | undefined {
  const format = body?.outputConfig?.textFormat;
  if (format !== undefined) {
    const schema = format?.structure?.jsonSchema?.schema;
    if (format?.type !== "json_schema" || typeof schema !== "string")
      return validation("outputConfig.textFormat: the structure's jsonSchema.schema must be a JSON schema given as a string.");
    try {
      JSON.parse(schema);
    } catch {
      return validation("outputConfig.textFormat.structure.jsonSchema.schema is not valid JSON.");
    }
  }
  const thinking = body?.additionalModelRequestFields?.thinking;
  // Anthropic's models take thinking as the Messages API does; Converse wraps the model's message.
  if (ANTHROPIC_MODEL.test(model) && thinking?.type === "enabled") {
    const wrapped = (message: string) => validation(`The model returned the following errors: ${message}`);
    const budget = thinking.budget_tokens;
    if (typeof budget !== "number" || budget < 1024)
      return wrapped("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
    const maxTokens = body?.inferenceConfig?.maxTokens;
    if (typeof maxTokens === "number" && budget >= maxTokens) return wrapped("`max_tokens` must be greater than `thinking.budget_tokens`.");
    const choice = body?.toolConfig?.toolChoice;
    if (choice?.tool || choice?.any) return wrapped("Thinking may not be enabled when tool_choice forces tool use.");
  }
  return undefined;
}
