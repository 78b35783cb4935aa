import type { CaptureTurn } from "./capture-turn.js";

/**
 * A capture turn (test/helpers/capture-turn.ts) in each dialect's documented wire format, as
 * one JSON body or as the server-sent events its clients read: chat completions
 * (`chat.completion`, `chat.completion.chunk` frames and `[DONE]`), the Responses API (a
 * `response`, or its typed events through `response.completed`) and Anthropic's Messages API
 * (a `message`, or `message_start` … `message_stop`). Each answer is plausible enough for the
 * official clients to finish: ids, usage and finish reasons are all there.
 */
export interface Rendered {
  json?: unknown;
  /** SSE frames, each already `event:`/`data:` formatted. */
  events?: string[];
}

const USAGE = { input: 12, output: 5 };
/** Ids of one capture server's answers, counted from 1 so that recording again gives the same ids. */
export type IdSource = () => string;

export function idSource(): IdSource {
  let counter = 0;
  return () => (++counter).toString(36).padStart(6, "0");
}

const frame = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`;
const halves = (text: string) => (text.length > 1 ? [text.slice(0, text.length >> 1), text.slice(text.length >> 1)] : [text]);

export function renderChat(turn: CaptureTurn, body: any, nextId: IdSource): Rendered {
  const id = `chatcmpl-capture-${nextId()}`;
  const model = String(body?.model ?? "capture");
  const usage = { prompt_tokens: USAGE.input, completion_tokens: USAGE.output, total_tokens: USAGE.input + USAGE.output };
  const call =
    turn.kind === "tool"
      ? { id: `call_${nextId()}`, type: "function", function: { name: turn.name, arguments: JSON.stringify(turn.arguments) } }
      : undefined;
  const finish = call ? "tool_calls" : "stop";
  if (!body?.stream) {
    const message = {
      role: "assistant",
      content: turn.kind === "text" ? turn.text : null,
      refusal: null,
      ...(call ? { tool_calls: [call] } : {}),
    };
    return {
      json: {
        id,
        object: "chat.completion",
        created: 1,
        model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
        usage,
      },
    };
  }
  const chunk = (choices: unknown[], extra: object = {}) =>
    frame({ id, object: "chat.completion.chunk", created: 1, model, choices, ...extra });
  const delta = (fields: object, finishReason: string | null = null) =>
    chunk([{ index: 0, delta: fields, logprobs: null, finish_reason: finishReason }]);
  const events = [delta({ role: "assistant", content: "", refusal: null })];
  if (turn.kind === "text") for (const part of halves(turn.text)) events.push(delta({ content: part }));
  if (call) {
    events.push(
      delta({ tool_calls: [{ index: 0, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] }),
    );
    for (const part of halves(call.function.arguments)) events.push(delta({ tool_calls: [{ index: 0, function: { arguments: part } }] }));
  }
  events.push(delta({}, finish));
  if (body.stream_options?.include_usage) events.push(chunk([], { usage }));
  events.push("data: [DONE]\n\n");
  return { events };
}

export function renderResponses(turn: CaptureTurn, body: any, nextId: IdSource): Rendered {
  const id = `resp_capture_${nextId()}`;
  const item =
    turn.kind === "text"
      ? {
          type: "message",
          id: `msg_capture_${nextId()}`,
          status: "completed",
          role: "assistant",
          content: [{ type: "output_text", text: turn.text, annotations: [], logprobs: [] }],
        }
      : {
          type: "function_call",
          id: `fc_capture_${nextId()}`,
          status: "completed",
          call_id: `call_${nextId()}`,
          name: turn.name,
          ...(turn.namespace ? { namespace: turn.namespace } : {}),
          arguments: JSON.stringify(turn.arguments),
        };
  const response = (status: string, output: unknown[]) => ({
    id,
    object: "response",
    created_at: 1,
    status,
    error: null,
    incomplete_details: null,
    instructions: body?.instructions ?? null,
    model: String(body?.model ?? "capture"),
    output,
    parallel_tool_calls: body?.parallel_tool_calls ?? true,
    tool_choice: body?.tool_choice ?? "auto",
    tools: body?.tools ?? [],
    text: body?.text ?? { format: { type: "text" } },
    metadata: body?.metadata ?? {},
    store: false,
    usage:
      status === "completed"
        ? {
            input_tokens: USAGE.input,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: USAGE.output,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: USAGE.input + USAGE.output,
          }
        : null,
  });
  if (!body?.stream) return { json: response("completed", [item]) };
  let sequence = 0;
  const event = (type: string, data: object) => frame({ type, sequence_number: sequence++, ...data }, type);
  const events = [
    event("response.created", { response: response("in_progress", []) }),
    event("response.in_progress", { response: response("in_progress", []) }),
  ];
  if (turn.kind === "text") {
    const text = turn.text;
    const empty = { type: "output_text", text: "", annotations: [], logprobs: [] };
    events.push(event("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }));
    events.push(event("response.content_part.added", { output_index: 0, item_id: item.id, content_index: 0, part: empty }));
    for (const delta of halves(text))
      events.push(event("response.output_text.delta", { output_index: 0, item_id: item.id, content_index: 0, delta, logprobs: [] }));
    events.push(event("response.output_text.done", { output_index: 0, item_id: item.id, content_index: 0, text, logprobs: [] }));
    events.push(event("response.content_part.done", { output_index: 0, item_id: item.id, content_index: 0, part: { ...empty, text } }));
  } else {
    const args = JSON.stringify(turn.arguments);
    events.push(event("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", arguments: "" } }));
    for (const delta of halves(args))
      events.push(event("response.function_call_arguments.delta", { output_index: 0, item_id: item.id, delta }));
    events.push(event("response.function_call_arguments.done", { output_index: 0, item_id: item.id, name: turn.name, arguments: args }));
  }
  events.push(event("response.output_item.done", { output_index: 0, item }));
  events.push(event("response.completed", { response: response("completed", [item]) }));
  return { events };
}

export function renderMessages(turn: CaptureTurn, body: any, nextId: IdSource): Rendered {
  const id = `msg_capture_${nextId()}`;
  const model = String(body?.model ?? "capture");
  const block =
    turn.kind === "text"
      ? { type: "text", text: turn.text }
      : { type: "tool_use", id: `toolu_capture_${nextId()}`, name: turn.name, input: turn.arguments };
  const stopReason = turn.kind === "tool" ? "tool_use" : "end_turn";
  const usage = { input_tokens: USAGE.input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: USAGE.output };
  const message = { id, type: "message", role: "assistant", model, stop_reason: stopReason, stop_sequence: null };
  if (!body?.stream) return { json: { ...message, content: [block], usage } };
  const event = (type: string, data: object = {}) => frame({ type, ...data }, type);
  const events = [
    event("message_start", { message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } }),
    event("ping"),
  ];
  if (block.type === "text") {
    events.push(event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }));
    for (const text of halves(String(block.text)))
      events.push(event("content_block_delta", { index: 0, delta: { type: "text_delta", text } }));
  } else {
    events.push(event("content_block_start", { index: 0, content_block: { ...block, input: {} } }));
    for (const partial_json of halves(JSON.stringify(block.input)))
      events.push(event("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json } }));
  }
  events.push(event("content_block_stop", { index: 0 }));
  events.push(event("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { ...usage } }));
  events.push(event("message_stop"));
  return { events };
}

/** OpenAI's embeddings answer: one vector per input, as floats or (`encoding_format: "base64"`, the `openai` client's default) base64 little-endian float32. */
export function renderEmbeddings(body: any): Rendered {
  const inputs: unknown[] = Array.isArray(body?.input) && typeof body.input[0] !== "number" ? body.input : [body?.input];
  const dimensions = typeof body?.dimensions === "number" ? body.dimensions : 8;
  const data = inputs.map((_, index) => {
    const vector = Array.from({ length: dimensions }, (_, i) => Math.round(Math.sin(index + i + 1) * 1000) / 1000);
    const embedding = body?.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector;
    return { object: "embedding", index, embedding };
  });
  return {
    json: {
      object: "list",
      data,
      model: String(body?.model ?? "capture"),
      usage: { prompt_tokens: inputs.length * 3, total_tokens: inputs.length * 3 },
    },
  };
}
