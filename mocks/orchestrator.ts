import { callSignal } from "./call-signal.js";
import { http, HttpResponse, type HttpHandler } from "msw";

/**
 * msw handlers for a plausible orchestrator (the upstream of orchestrator-proxy mode,
 * docs/orchestrator.md "Upstream API"). The paths mirror the Gateway's under ORCH_BASE_URL:
 *
 *   GET  /agents                      → [agent]
 *   POST /agents                      → 201 agent (409 if the name exists, 422 FastAPI-style for a bad model)
 *   GET  /agents/{name}               → agent | 404 {detail}
 *   GET  /agents/{name}/logs?tail=N   → {name, lines}
 *   POST /agents/{name}/pause|resume|cancel → {name, status} (409 from a state that does not allow it)
 *   GET  /agents/{name}/stream        → text/event-stream of JSON events
 *   GET  /agents/{name}/diff          → {name, diff}
 *   GET  /agents/{name}/files?path=   → {name, path, files}
 *   POST /agents/{name}/commit        → {name, sha, message}
 *   POST /agents/{name}/pr            → {name, number, url, title}
 *
 * Every request is recorded; `script` overrides the next answers of one route (errors, hangs,
 * dropped connections) and `scriptStream` the events of an agent's stream.
 */

export interface OrchestratorAgent {
  id: string;
  name: string;
  model: string;
  tools: string[];
  status: string;
  description: string;
  config: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

export interface OrchestratorCall {
  method: string;
  /** Path below the base URL, e.g. `/agents/builder/logs`. */
  path: string;
  query: URLSearchParams;
  body: unknown;
  headers: Headers;
  /** Resolves when the gateway aborted the request. */
  aborted: Promise<void>;
}

export type OrchestratorBehaviour =
  | { kind: "error"; status: number; body?: unknown; headers?: Record<string, string> }
  /** Never answers (until the request is aborted). */
  | { kind: "hang" }
  /** The connection fails without an answer. */
  | { kind: "network-error" };

export interface StreamScript {
  /** Each item is sent as one `data:` event (objects as JSON). */
  events: unknown[];
  /** After the first `sendBeforeHold` events, wait for this before sending the rest. */
  hold?: Promise<void>;
  sendBeforeHold?: number;
}

export interface OrchestratorMock {
  handlers: HttpHandler[];
  calls: OrchestratorCall[];
  agents: Map<string, OrchestratorAgent>;
  /** Answers the next `times` requests of `"<METHOD> <path>"` (default once) with `behaviour`. */
  script(route: string, behaviour: OrchestratorBehaviour, times?: number): void;
  scriptStream(name: string, script: StreamScript): void;
  reset(): void;
}

const encoder = new TextEncoder();
const now = () => new Date().toISOString().replace(/Z$/, "");

export function createOrchestratorMock(baseURL: string): OrchestratorMock {
  const base = baseURL.replace(/\/+$/, "");
  const calls: OrchestratorCall[] = [];
  const agents = new Map<string, OrchestratorAgent>();
  const scripts = new Map<string, OrchestratorBehaviour[]>();
  const streams = new Map<string, StreamScript>();
  const logs = new Map<string, string[]>();

  const notFound = (name: string) => HttpResponse.json({ detail: `Agent '${name}' not found` }, { status: 404 });

  async function record(request: Request, params: Record<string, string | readonly string[] | undefined>) {
    const url = new URL(request.url);
    let body: unknown;
    if (request.method !== "GET") {
      const text = await request.clone().text();
      body = text ? JSON.parse(text) : undefined;
    }
    const aborted = new Promise<void>((resolve) => {
      if (callSignal(request).aborted) resolve();
      callSignal(request).addEventListener("abort", () => resolve(), { once: true });
    });
    calls.push({
      method: request.method,
      path: url.pathname.slice(new URL(base).pathname.replace(/\/$/, "").length),
      query: url.searchParams,
      body,
      headers: request.headers,
      aborted,
    });
    const route = `${request.method} ${calls.at(-1)!.path}`;
    const queue = scripts.get(route);
    const behaviour = queue?.shift();
    if (queue && queue.length === 0) scripts.delete(route);
    const name = typeof params.name === "string" ? decodeURIComponent(params.name) : undefined;
    return { behaviour, body, name, url, signal: callSignal(request) };
  }

  function answer(behaviour: OrchestratorBehaviour, signal: AbortSignal): Response | Promise<Response> {
    switch (behaviour.kind) {
      case "error":
        return HttpResponse.json(behaviour.body ?? null, { status: behaviour.status, headers: behaviour.headers });
      case "network-error":
        return HttpResponse.error();
      case "hang":
        return new Promise<Response>((resolve) => signal.addEventListener("abort", () => resolve(HttpResponse.error()), { once: true }));
    }
  }

  function transition(name: string, action: string): Response {
    const agent = agents.get(name);
    if (!agent) return notFound(name);
    const allowed: Record<string, { from: string[]; to: string }> = {
      pause: { from: ["running"], to: "paused" },
      resume: { from: ["paused"], to: "running" },
      cancel: { from: ["running", "paused"], to: "cancelled" },
    };
    const rule = allowed[action]!;
    if (!rule.from.includes(agent.status)) {
      return HttpResponse.json({ detail: `Cannot ${action} agent '${name}' in state ${agent.status}` }, { status: 409 });
    }
    agent.status = rule.to;
    agent.updatedAt = now();
    return HttpResponse.json({ name, status: agent.status });
  }

  const handlers: HttpHandler[] = [
    http.get(`${base}/agents`, async ({ request, params }) => {
      const { behaviour, signal, url } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      const status = url.searchParams.get("status");
      return HttpResponse.json([...agents.values()].filter((agent) => !status || agent.status === status));
    }),
    http.post(`${base}/agents`, async ({ request, params }) => {
      const { behaviour, body, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      const input = (body ?? {}) as Partial<OrchestratorAgent>;
      if (!input.name) return HttpResponse.json({ detail: [{ loc: ["body", "name"], msg: "field required" }] }, { status: 422 });
      if (input.model === "unknown-model")
        return HttpResponse.json({ detail: [{ loc: ["body", "model"], msg: "unknown model" }] }, { status: 422 });
      if (agents.has(input.name)) return HttpResponse.json({ detail: `Agent '${input.name}' already exists` }, { status: 409 });
      const agent: OrchestratorAgent = {
        id: `orch-${agents.size + 1}`,
        name: input.name,
        model: input.model ?? "default",
        tools: input.tools ?? [],
        status: "running",
        description: input.description ?? "",
        config: input.config ?? {},
        createdAt: now(),
        updatedAt: now(),
      };
      agents.set(agent.name, agent);
      logs.set(
        agent.name,
        Array.from({ length: 5 }, (_, i) => `line ${i + 1} of ${agent.name}`),
      );
      return HttpResponse.json(agent, { status: 201 });
    }),
    http.get(`${base}/agents/:name`, async ({ request, params }) => {
      const { behaviour, name, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      const agent = agents.get(name!);
      return agent ? HttpResponse.json(agent) : notFound(name!);
    }),
    http.get(`${base}/agents/:name/logs`, async ({ request, params }) => {
      const { behaviour, name, url, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      const tail = Number(url.searchParams.get("tail") ?? "100");
      return HttpResponse.json({ name, lines: logs.get(name!)!.slice(-tail) });
    }),
    ...["pause", "resume", "cancel"].map((action) =>
      http.post(`${base}/agents/:name/${action}`, async ({ request, params }) => {
        const { behaviour, name, signal } = await record(request, params);
        if (behaviour) return answer(behaviour, signal);
        return transition(name!, action);
      }),
    ),
    http.get(`${base}/agents/:name/stream`, async ({ request, params }) => {
      const { behaviour, name, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      const script = streams.get(name!) ?? { events: [{ type: "status", status: agents.get(name!)!.status }] };
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          const send = (event: unknown) =>
            controller.enqueue(encoder.encode(`data: ${typeof event === "string" ? event : JSON.stringify(event)}\n\n`));
          const first = script.hold ? (script.sendBeforeHold ?? 0) : script.events.length;
          script.events.slice(0, first).forEach(send);
          controller.enqueue(encoder.encode(": keep-alive\n\n"));
          if (script.hold) {
            await script.hold;
            if (signal.aborted) return;
            script.events.slice(first).forEach(send);
          }
          controller.close();
        },
      });
      return new HttpResponse(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
    }),
    http.get(`${base}/agents/:name/diff`, async ({ request, params }) => {
      const { behaviour, name, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      return HttpResponse.json({ name, diff: `--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new by ${name}\n` });
    }),
    http.get(`${base}/agents/:name/files`, async ({ request, params }) => {
      const { behaviour, name, url, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      const path = url.searchParams.get("path") ?? "/";
      return HttpResponse.json({ name, path, files: [{ path: `${path.replace(/\/$/, "")}/README.md`, size: 12 }] });
    }),
    http.post(`${base}/agents/:name/commit`, async ({ request, params }) => {
      const { behaviour, name, body, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      const message = (body as { message?: string } | undefined)?.message;
      if (!message) return HttpResponse.json({ error: { message: "commit message is required" } }, { status: 400 });
      return HttpResponse.json({ name, sha: "0a1b2c3d", message });
    }),
    http.post(`${base}/agents/:name/pr`, async ({ request, params }) => {
      const { behaviour, name, body, signal } = await record(request, params);
      if (behaviour) return answer(behaviour, signal);
      if (!agents.has(name!)) return notFound(name!);
      const title = (body as { title?: string } | undefined)?.title ?? `Changes by ${name}`;
      return HttpResponse.json({ name, number: 7, url: `https://git.example.com/pulls/7`, title }, { status: 201 });
    }),
  ];

  return {
    handlers,
    calls,
    agents,
    script(route, behaviour, times = 1) {
      const queue = scripts.get(route) ?? [];
      for (let i = 0; i < times; i += 1) queue.push(behaviour);
      scripts.set(route, queue);
    },
    scriptStream(name, script) {
      streams.set(name, script);
    },
    reset() {
      calls.length = 0;
      agents.clear();
      scripts.clear();
      streams.clear();
      logs.clear();
    },
  };
}
