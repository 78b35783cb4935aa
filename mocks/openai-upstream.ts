import { http, HttpResponse, type HttpHandler } from "msw";
import { callSignal } from "./call-signal.js";

/**
 * msw handlers for an OpenAI-compatible model provider (`POST <baseURL>/chat/completions`).
 * Each request is recorded (body, headers, whether it was aborted) and answered by the
 * behaviour scripted for the upstream model name it asks for; unscripted models answer like
 * an echo model. Used by the chat tests and reusable by anything that needs a provider.
 */

export interface UpstreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export type UpstreamBehaviour =
  /** A whole completion (or, when the request streams, the same text as chunks). */
  | { kind: "reply"; words?: string[]; usage?: UpstreamUsage | null }
  /**
   * A stream of `words`, one chunk each. With `holdBeforeEnd`, everything up to the last word is
   * sent and the stream waits for that promise before finishing (so a test can see chunks
   * arrive while the upstream is still open). With `dropAfter`, the connection ends after that
   * many words, without a finish chunk, usage or [DONE] (with `holdBeforeEnd` too, it waits for
   * the promise before it ends). With `hangAfter`, it goes silent after that many words until
   * the request is aborted.
   */
  | { kind: "stream"; words: string[]; usage?: UpstreamUsage | null; holdBeforeEnd?: Promise<void>; dropAfter?: number; hangAfter?: number }
  /** An error answer, relayed by the gateway verbatim. */
  | { kind: "error"; status: number; body: unknown; headers?: Record<string, string> }
  /** Never answers (until the request is aborted). */
  | { kind: "hang" };

export interface UpstreamCall {
  /** The URL requested (query included). */
  url: URL;
  body: Record<string, any>;
  headers: Headers;
  /** Resolves when the gateway aborted this request. */
  aborted: Promise<void>;
  wasAborted(): boolean;
}

export interface OpenAiUpstream {
  handlers: HttpHandler[];
  calls: UpstreamCall[];
  /** Scripts the answers for requests naming `upstreamModel`. */
  script(upstreamModel: string, behaviour: UpstreamBehaviour): void;
  reset(): void;
}

const encoder = new TextEncoder();
const sse = (data: unknown) => encoder.encode(`data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`);

/** Usage the fake provider reports: 1 token per word, 10 per request for the prompt. */
export function fakeUsage(words: readonly string[]): UpstreamUsage {
  return { prompt_tokens: 10, completion_tokens: words.length, total_tokens: 10 + words.length };
}

export function createOpenAiUpstream(baseURL: string): OpenAiUpstream {
  const calls: UpstreamCall[] = [];
  const scripts = new Map<string, UpstreamBehaviour>();

  const handler = http.post(`${baseURL.replace(/\/+$/, "")}/chat/completions`, async ({ request }) => {
    const body = (await request.json()) as Record<string, any>;
    let aborted = false;
    const signal = callSignal(request);
    const abortedPromise = new Promise<void>((resolve) => {
      if (signal.aborted) {
        aborted = true;
        resolve();
      }
      signal.addEventListener("abort", () => {
        aborted = true;
        resolve();
      });
    });
    calls.push({ url: new URL(request.url), body, headers: request.headers, aborted: abortedPromise, wasAborted: () => aborted });

    const model = String(body.model);
    const lastUser = [...(body.messages ?? [])].reverse().find((message: any) => message.role === "user");
    const behaviour: UpstreamBehaviour = scripts.get(model) ?? {
      kind: "reply",
      words: String(lastUser?.content ?? "").match(/\s*\S+/g) ?? [],
    };
    const id = `chatcmpl-upstream-${calls.length}`;

    if (behaviour.kind === "error")
      return HttpResponse.json(behaviour.body as any, { status: behaviour.status, headers: behaviour.headers });
    if (behaviour.kind === "hang") {
      await abortedPromise;
      return HttpResponse.error();
    }
    const words = behaviour.words ?? [];
    const usage = behaviour.usage === undefined ? fakeUsage(words) : behaviour.usage;
    if (!body.stream) {
      return HttpResponse.json({
        id,
        object: "chat.completion",
        created: 1,
        model,
        choices: [{ index: 0, message: { role: "assistant", content: words.join("") }, finish_reason: "stop" }],
        ...(usage ? { usage } : {}),
      });
    }

    const script = behaviour.kind === "stream" ? behaviour : { words, usage: behaviour.usage };
    const frame = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
      id,
      object: "chat.completion.chunk",
      created: 1,
      model,
      choices,
      ...extra,
    });
    // Pull-driven (highWaterMark 0): each frame is produced when the reader asks for it, so a
    // scripted drop happens after the frames before it were delivered, not instead of them.
    async function* frames(): AsyncGenerator<Uint8Array | "drop" | "hang"> {
      yield sse(frame([{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }]));
      for (let index = 0; index < script.words.length; index++) {
        if ("dropAfter" in script && script.dropAfter === index) {
          if ("holdBeforeEnd" in script && script.holdBeforeEnd) await Promise.race([script.holdBeforeEnd, abortedPromise]);
          return yield "drop";
        }
        if ("hangAfter" in script && script.hangAfter === index) return yield "hang";
        if (index === script.words.length - 1 && "holdBeforeEnd" in script && script.holdBeforeEnd && script.dropAfter === undefined) {
          await Promise.race([script.holdBeforeEnd, abortedPromise]);
        }
        yield sse(frame([{ index: 0, delta: { content: script.words[index] }, finish_reason: null }]));
      }
      yield sse(frame([{ index: 0, delta: {}, finish_reason: "stop" }]));
      if (usage && body.stream_options?.include_usage) yield sse(frame([], { usage }));
      yield sse("[DONE]");
    }
    const source = frames();
    const stream = new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          const { done, value } = await source.next();
          if (aborted) return;
          if (done) return controller.close();
          // The connection ends early: what was sent is delivered, then no finish, usage or [DONE].
          if (value === "drop") return controller.close();
          if (value === "hang") return abortedPromise;
          controller.enqueue(value);
        },
        cancel() {
          aborted = true;
        },
      },
      { highWaterMark: 0 },
    );
    return new HttpResponse(stream, { status: 200, headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  });

  return {
    handlers: [handler],
    calls,
    script(upstreamModel, behaviour) {
      scripts.set(upstreamModel, behaviour);
    },
    reset() {
      calls.length = 0;
      scripts.clear();
    },
  };
}
