import { EventStreamCodec } from "@smithy/eventstream-codec";
import { fromUtf8, toUtf8 } from "@smithy/util-utf8";
import { http, HttpResponse, type HttpHandler } from "msw";
import { frameStream, scripted, usageOf, wordsOf, type MockTurn, type ScriptedProvider } from "./scripted-provider.js";

/**
 * msw handlers for Amazon Bedrock's Converse API in its documented wire format:
 * `POST <endpoint>/model/<modelId>/converse` answers a `ConverseResponse`; `/converse-stream`
 * answers AWS's binary event stream (`application/vnd.amazon.eventstream`): `messageStart`,
 * `contentBlockStart` (tool use), `contentBlockDelta` (`text`, `toolUse.input`),
 * `contentBlockStop`, `messageStop`, `metadata` (usage), and exception frames
 * (`:message-type: exception`). Requests are recorded (signature headers included); answers
 * are scripted per model id.
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
    const lastUser = [...(body?.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const echo = (lastUser?.content ?? []).map((block: any) => block.text ?? "").join("");
    const behaviour = provider.behaviour(model, body, echo);
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const usage = usageOf(turn);
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
        output: { message: { role: "assistant", content: contentOf(turn) } },
        stopReason,
        usage: tokenUsage,
        metrics: { latencyMs: 12 },
      });
    }
    const frames = [eventFrame("messageStart", { role: "assistant" })];
    let index = 0;
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
