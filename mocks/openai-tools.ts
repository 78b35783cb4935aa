import { http, HttpResponse, type HttpHandler } from "msw";

/**
 * msw handlers for an OpenAI-compatible provider that calls tools: each request to
 * `POST <baseURL>/chat/completions` is recorded and answered by the script registered for
 * the upstream model it names — a text answer or `tool_calls`, as JSON or (when the request
 * streams) as `chat.completion.chunk` frames with the call arguments split across frames, the
 * way real providers send them.
 */

export interface ToolCallTurn {
  toolCalls: { name: string; arguments: Record<string, unknown> | string }[];
  usage?: ProviderUsage;
}
export interface TextTurn {
  text: string;
  usage?: ProviderUsage;
}
export type ScriptedTurn = ToolCallTurn | TextTurn;

export interface ProviderUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** Decides the next turn from the request (its messages show what the tools returned). */
export type TurnScript = (body: Record<string, any>, turn: number) => ScriptedTurn;

export interface ToolCallingUpstream {
  handlers: HttpHandler[];
  /** Every request body, in order. */
  calls: Record<string, any>[];
  script(upstreamModel: string, script: TurnScript): void;
  reset(): void;
}

/** The usage reported when a turn does not set one: 10 prompt tokens, 5 completion tokens. */
export const DEFAULT_TURN_USAGE: ProviderUsage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };

const encoder = new TextEncoder();
const frame = (data: unknown) => encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);

export function createToolCallingUpstream(baseURL: string): ToolCallingUpstream {
  const calls: Record<string, any>[] = [];
  const scripts = new Map<string, TurnScript>();
  const turns = new Map<string, number>();

  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/chat/completions`, async ({ request }) => {
    const body = (await request.json()) as Record<string, any>;
    calls.push(body);
    const model = String(body.model);
    const script = scripts.get(model);
    if (!script) return HttpResponse.json({ error: { message: `no script for ${model}`, type: "invalid_request_error" } }, { status: 404 });
    const index = turns.get(model) ?? 0;
    turns.set(model, index + 1);
    const turn = script(body, index);
    const usage = turn.usage ?? DEFAULT_TURN_USAGE;
    const id = `chatcmpl-tools-${calls.length}`;
    const toolCalls =
      "toolCalls" in turn
        ? turn.toolCalls.map((call, i) => ({
            id: `call_${calls.length}_${i}`,
            type: "function" as const,
            function: { name: call.name, arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments) },
          }))
        : [];
    const finish = toolCalls.length ? "tool_calls" : "stop";

    if (!body.stream) {
      return HttpResponse.json({
        id,
        object: "chat.completion",
        created: 1,
        model,
        choices: [
          {
            index: 0,
            message: {
              role: "assistant",
              content: "text" in turn ? turn.text : null,
              ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
            },
            finish_reason: finish,
          },
        ],
        usage,
      });
    }
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
      id,
      object: "chat.completion.chunk",
      created: 1,
      model,
      choices,
      ...extra,
    });
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(frame(chunk([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }])));
        if ("text" in turn) {
          for (const word of turn.text.match(/\s*\S+/g) ?? [])
            controller.enqueue(frame(chunk([{ index: 0, delta: { content: word }, finish_reason: null }])));
        }
        for (const [i, call] of toolCalls.entries()) {
          controller.enqueue(
            frame(
              chunk([
                {
                  index: 0,
                  delta: {
                    tool_calls: [{ index: i, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }],
                  },
                  finish_reason: null,
                },
              ]),
            ),
          );
          const half = Math.floor(call.function.arguments.length / 2);
          for (const part of [call.function.arguments.slice(0, half), call.function.arguments.slice(half)]) {
            controller.enqueue(
              frame(chunk([{ index: 0, delta: { tool_calls: [{ index: i, function: { arguments: part } }] }, finish_reason: null }])),
            );
          }
        }
        controller.enqueue(frame(chunk([{ index: 0, delta: {}, finish_reason: finish }])));
        if (body.stream_options?.include_usage) controller.enqueue(frame(chunk([], { usage })));
        controller.enqueue(frame("[DONE]"));
        controller.close();
      },
    });
    return new HttpResponse(stream, { headers: { "content-type": "text/event-stream" } });
  });

  return {
    handlers: [handler],
    calls,
    script(upstreamModel, script) {
      scripts.set(upstreamModel, script);
      turns.set(upstreamModel, 0);
    },
    reset() {
      calls.length = 0;
      scripts.clear();
      turns.clear();
    },
  };
}

/** The `tool` messages of a request, by the name of the tool each answers. */
export function toolReplies(body: Record<string, any>): { name: string; content: string }[] {
  const names = new Map<string, string>();
  for (const message of body.messages ?? []) for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
  return (body.messages ?? [])
    .filter((message: any) => message.role === "tool")
    .map((message: any) => ({ name: names.get(message.tool_call_id) ?? "?", content: String(message.content) }));
}
