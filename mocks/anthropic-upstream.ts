import { http, HttpResponse, type HttpHandler } from "msw";
import { frameStream, scripted, sseEvent, usageOf, wordsOf, type MockTurn, type ScriptedProvider } from "./scripted-provider.js";

/**
 * msw handlers for Anthropic's Messages API (`POST <baseURL>/v1/messages`) in its documented
 * wire format: a `message` object, or (with `stream: true`) the events `message_start`,
 * `content_block_start`, `ping`, `content_block_delta` (`text_delta`, `input_json_delta`),
 * `content_block_stop`, `message_delta`, `message_stop`, and `error` for in-stream errors.
 * Requests are recorded; answers are scripted per model (mocks/scripted-provider.ts).
 */
export function createAnthropicUpstream(baseURL: string): ScriptedProvider & { handlers: HttpHandler[] } {
  const provider = scripted();
  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/v1/messages`, async ({ request }) => {
    const body = provider.record(request, await request.text());
    // The Messages API refuses tool blocks in a request that declares no tools.
    const toolBlocks = (body?.messages ?? []).some(
      (message: any) =>
        Array.isArray(message.content) && message.content.some((block: any) => block.type === "tool_use" || block.type === "tool_result"),
    );
    if (toolBlocks && !body?.tools?.length)
      return HttpResponse.json(
        {
          type: "error",
          error: { type: "invalid_request_error", message: "Requests which include `tool_use` or `tool_result` blocks must define tools." },
        },
        { status: 400 },
      );
    const lastUser = [...(body?.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const echo =
      typeof lastUser?.content === "string" ? lastUser.content : (lastUser?.content ?? []).map((block: any) => block.text ?? "").join("");
    const behaviour = provider.behaviour(String(body?.model), body, echo);
    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    const turn = behaviour.turn;
    const id = `msg_${provider.calls.length}`;
    const usage = usageOf(turn);
    // Thinking counts in output_tokens; cache reads and writes are reported beside input_tokens.
    const promptUsage = {
      input_tokens: usage.input,
      cache_creation_input_tokens: usage.cacheWrite,
      cache_read_input_tokens: usage.cacheRead,
    };
    const outputTokens = usage.output + usage.thoughts;
    const stopReason = turn.toolCalls?.length ? "tool_use" : turn.finish === "length" ? "max_tokens" : "end_turn";
    if (!body.stream) {
      return HttpResponse.json({
        id,
        type: "message",
        role: "assistant",
        model: body.model,
        content: contentOf(turn),
        stop_reason: stopReason,
        stop_sequence: null,
        usage: { ...promptUsage, output_tokens: outputTokens },
      });
    }
    const frames = [
      sseEvent(
        {
          type: "message_start",
          message: {
            id,
            type: "message",
            role: "assistant",
            model: body.model,
            content: [],
            stop_reason: null,
            stop_sequence: null,
            usage: { ...promptUsage, output_tokens: 1 },
          },
        },
        "message_start",
      ),
      sseEvent({ type: "ping" }, "ping"),
    ];
    let index = 0;
    if (turn.text !== undefined) {
      frames.push(sseEvent({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, "content_block_start"));
      for (const word of wordsOf(turn.text))
        frames.push(sseEvent({ type: "content_block_delta", index, delta: { type: "text_delta", text: word } }, "content_block_delta"));
      frames.push(sseEvent({ type: "content_block_stop", index }, "content_block_stop"));
      index++;
    }
    for (const call of turn.toolCalls ?? []) {
      frames.push(
        sseEvent(
          { type: "content_block_start", index, content_block: { type: "tool_use", id: call.id, name: call.name, input: {} } },
          "content_block_start",
        ),
      );
      // A call without input streams only the empty partial_json.
      const json = Object.keys(call.input).length ? JSON.stringify(call.input) : "";
      const half = Math.floor(json.length / 2);
      frames.push(
        sseEvent({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } }, "content_block_delta"),
      );
      for (const part of json ? [json.slice(0, half), json.slice(half)] : [])
        frames.push(
          sseEvent({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: part } }, "content_block_delta"),
        );
      frames.push(sseEvent({ type: "content_block_stop", index }, "content_block_stop"));
      index++;
    }
    frames.push(
      sseEvent(
        { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } },
        "message_delta",
      ),
    );
    frames.push(sseEvent({ type: "message_stop" }, "message_stop"));
    if (behaviour.kind === "stream-error") {
      frames.splice(
        behaviour.after,
        frames.length,
        sseEvent({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }, "error"),
      );
    }
    return frameStream(frames, "text/event-stream", behaviour.kind === "cut" ? behaviour.after : undefined);
  });
  return { ...provider, handlers: [handler] };
}

function contentOf(turn: MockTurn): unknown[] {
  const content: unknown[] = [];
  if (turn.text !== undefined) content.push({ type: "text", text: turn.text });
  for (const call of turn.toolCalls ?? []) content.push({ type: "tool_use", id: call.id, name: call.name, input: call.input });
  return content;
}
