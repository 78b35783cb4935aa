import { HttpResponse } from "msw";

/**
 * What the provider mocks (mocks/anthropic-upstream.ts, gemini-upstream.ts, bedrock-upstream.ts,
 * openai-chat-upstream.ts, openai-responses-upstream.ts) share: every request recorded as the provider received it, and an
 * answer scripted per upstream model in provider-neutral terms that each mock renders in its
 * own documented wire format. An unscripted model answers like an echo model.
 */

export interface MockToolCall {
  id: string;
  name: string;
  input: Record<string, unknown>;
  /** Gemini 3's `thoughtSignature` on the call's part (other mocks ignore it). */
  signature?: string;
  /**
   * The Responses API's `namespace` of the call (other mocks ignore it). Without it, the Responses
   * mock finds the namespace of a name declared inside one `namespace` tool of the request.
   */
  namespace?: string;
}

/**
 * Tokens of one turn in provider-neutral terms, each mock reporting them in its own fields: the
 * prompt the gateway bills is `input + cacheRead + cacheWrite`, the completion `output + thoughts`.
 */
export interface MockUsage {
  /** Prompt tokens read fresh. */
  input: number;
  output: number;
  /** Prompt tokens read from, and written to, the provider's prompt cache. */
  cacheRead?: number;
  cacheWrite?: number;
  /** Reasoning tokens, which some providers count apart from the answer. */
  thoughts?: number;
}

export interface MockTurn {
  text?: string;
  /**
   * The model's reasoning, sent (as each provider sends thinking) when the request asks for it;
   * without one, such a request gets `reasoningOf`'s text.
   */
  reasoning?: string;
  toolCalls?: MockToolCall[];
  /** `length`: the answer was cut at the token cap. */
  finish?: "stop" | "length";
  usage?: MockUsage;
}

export type MockBehaviour =
  | { kind: "turn"; turn: MockTurn }
  /** An error answer with this status, body and headers (as the provider sends them). */
  | { kind: "error"; status: number; body: unknown; headers?: Record<string, string> }
  /** A streamed turn whose connection ends after `after` frames (no end, no usage). */
  | { kind: "cut"; turn: MockTurn; after: number }
  /** A streamed turn that reports the provider's in-stream error after `after` frames. */
  | { kind: "stream-error"; turn: MockTurn; after: number };

export type MockScript = MockBehaviour | ((body: any, turn: number) => MockBehaviour);

export interface RecordedCall {
  url: URL;
  headers: Headers;
  body: any;
  raw: string;
}

export interface ScriptedProvider {
  calls: RecordedCall[];
  script(upstreamModel: string, script: MockScript): void;
  reset(): void;
}

/** Words of a text, each with its leading space, as providers stream them. */
export function wordsOf(text: string): string[] {
  return text.match(/\s*\S+/g) ?? [];
}

/**
 * Default usage: 10 prompt tokens, one completion token per word and per tool call, and one
 * reasoning token per word of the `reasoning` sent (when the request asked for thinking).
 */
export function usageOf(turn: MockTurn, reasoning?: string): Required<MockUsage> {
  const usage = turn.usage ?? {
    input: 10,
    output: wordsOf(turn.text ?? "").length + (turn.toolCalls?.length ?? 0),
    thoughts: wordsOf(reasoning ?? "").length,
  };
  return { cacheRead: 0, cacheWrite: 0, thoughts: 0, ...usage };
}

/** The reasoning a request that asks for thinking gets: the turn's own, or one about the echoed text. */
export function reasoningOf(turn: MockTurn, echo: string): string {
  return turn.reasoning ?? `Thinking about: ${echo || "the request"}`;
}

export function scripted(): ScriptedProvider & {
  /**
   * The scripted behaviour of `model`; an unscripted model answers with `unscripted()` (each mock's
   * echo turn, honouring what the request asks for: a structured output, a forced tool call), or
   * else with the echoed text.
   */
  behaviour(model: string, body: any, echo: string, unscripted?: () => MockTurn): MockBehaviour;
  record(request: Request, raw: string): any;
} {
  const calls: RecordedCall[] = [];
  const scripts = new Map<string, MockScript>();
  const turns = new Map<string, number>();
  return {
    calls,
    script(model, script) {
      scripts.set(model, script);
      turns.set(model, 0);
    },
    reset() {
      calls.length = 0;
      scripts.clear();
      turns.clear();
    },
    record(request, raw) {
      let body: any;
      try {
        body = JSON.parse(raw);
      } catch {
        body = undefined;
      }
      calls.push({ url: new URL(request.url), headers: request.headers, body, raw });
      return body;
    },
    behaviour(model, body, echo, unscripted) {
      const script = scripts.get(model);
      if (!script) return { kind: "turn", turn: unscripted?.() ?? { text: echo } };
      const turn = turns.get(model) ?? 0;
      turns.set(model, turn + 1);
      return typeof script === "function" ? script(body, turn) : script;
    },
  };
}

/**
 * A body that sends `frames` one per read (pull-driven, so a cut happens after the frames
 * before it were delivered), ending the connection after `cutAfter` frames when set.
 */
export function frameStream(frames: Uint8Array[], contentType: string, cutAfter?: number): HttpResponse<any> {
  let index = 0;
  const stream = new ReadableStream<Uint8Array>(
    {
      pull(controller) {
        if (index >= frames.length || (cutAfter !== undefined && index >= cutAfter)) return controller.close();
        controller.enqueue(frames[index++]!);
      },
    },
    { highWaterMark: 0 },
  );
  return new HttpResponse(stream, { status: 200, headers: { "content-type": contentType } });
}

const encoder = new TextEncoder();

/** One server-sent event. */
export function sseEvent(data: unknown, event?: string): Uint8Array {
  return encoder.encode(`${event ? `event: ${event}\n` : ""}data: ${JSON.stringify(data)}\n\n`);
}
