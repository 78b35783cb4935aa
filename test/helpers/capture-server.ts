import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import {
  type IdSource,
  idSource,
  renderChat,
  renderEmbeddings,
  renderMessages,
  renderResponses,
  type Rendered,
} from "./capture-answers.js";
import { decideTurn } from "./capture-turn.js";

/**
 * A loopback server that answers the three chat dialects plausibly and records what each
 * client sent (docs/clients.md "Golden fixtures"): `…/chat/completions`, `…/responses`,
 * `…/messages` (JSON or SSE as the request asks), `…/messages/count_tokens`, `…/embeddings`
 * and `GET …/models`, under any prefix, so one server stands in for OpenAI, Anthropic and any
 * base URL a client is given. Anything else is recorded too and answered 404.
 *
 * A scenario script that runs several scenarios in one process announces each with
 * `POST /__capture/scenario` (its name as the body) before it starts, so each request is filed
 * under its scenario without a header of ours in what the client sends.
 */
export const SCENARIO_PATH = "/__capture/scenario";
export type CapturedDialect = "chat" | "responses" | "messages" | "count_tokens" | "embeddings" | "models" | "other";

export interface CapturedRequest {
  /** The scenario a client announced before this request (`POST /__capture/scenario`), if any. */
  scenario?: string;
  method: string;
  /** Path and query, as the client sent them. */
  path: string;
  dialect: CapturedDialect;
  /** The request headers that describe the client; credentials are replaced by what kind they were. */
  headers: Record<string, string>;
  body: unknown;
}

export interface CaptureServer {
  origin: string;
  /** Everything recorded so far, in arrival order. */
  requests: CapturedRequest[];
  /** Returns and forgets what was recorded so far. */
  take(): CapturedRequest[];
  close(): Promise<void>;
}

/** Headers that only describe the connection or change with every request. */
const DROPPED = new Set(["host", "content-length", "connection", "accept-encoding", "keep-alive", "transfer-encoding"]);
const SECRET = /authorization|api-key|token|secret|cookie/i;
/** Ids minted per run or per request: kept by name only, so that recording again changes nothing. */
const VOLATILE = /session|conversation|thread|turn|window|request-id|idempotency|trace/i;

/**
 * Credentials become their scheme (`Bearer <secret>`), so a fixture says how the client
 * authenticates and never with what; per-run ids become `<varies>`.
 */
export function redactHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of Object.keys(headers).sort()) {
    if (DROPPED.has(name)) continue;
    const value = String(headers[name]);
    kept[name] = SECRET.test(name) ? (/^bearer /i.test(value) ? "Bearer <secret>" : "<secret>") : VOLATILE.test(name) ? "<varies>" : value;
  }
  return kept;
}

function dialectOf(method: string, url: string): CapturedDialect {
  const path = url.replace(/\?.*$/, "");
  if (method === "GET" && /\/models$/.test(path)) return "models";
  if (method !== "POST") return "other";
  if (/\/chat\/completions$/.test(path)) return "chat";
  if (/\/responses$/.test(path)) return "responses";
  if (/\/messages\/count_tokens$/.test(path)) return "count_tokens";
  if (/\/messages$/.test(path)) return "messages";
  if (/\/embeddings$/.test(path)) return "embeddings";
  return "other";
}

const MODELS = ["capture-model"].map((id) => ({
  id,
  object: "model",
  type: "model",
  display_name: id,
  created: 1,
  created_at: "2026-01-01T00:00:00Z",
  owned_by: "capture",
}));

function answer(dialect: CapturedDialect, body: any, nextId: IdSource): { status: number; rendered: Rendered } {
  switch (dialect) {
    case "chat":
      return { status: 200, rendered: renderChat(decideTurn("chat", body), body, nextId) };
    case "responses":
      return { status: 200, rendered: renderResponses(decideTurn("responses", body), body, nextId) };
    case "messages":
      return { status: 200, rendered: renderMessages(decideTurn("messages", body), body, nextId) };
    case "count_tokens":
      return { status: 200, rendered: { json: { input_tokens: 12 } } };
    case "embeddings":
      return { status: 200, rendered: renderEmbeddings(body) };
    case "models":
      return {
        status: 200,
        rendered: { json: { object: "list", data: MODELS, has_more: false, first_id: MODELS[0]!.id, last_id: MODELS[0]!.id } },
      };
    default:
      return { status: 404, rendered: { json: { error: { type: "not_found_error", message: "Not served by the capture server" } } } };
  }
}

export async function startCaptureServer(): Promise<CaptureServer> {
  let requests: CapturedRequest[] = [];
  let scenario: string | undefined;
  const nextId = idSource();
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    let body: unknown = raw || undefined;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      // not JSON: recorded as text
    }
    const method = req.method ?? "GET";
    const path = req.url ?? "/";
    if (path === SCENARIO_PATH) {
      scenario = raw;
      res.writeHead(204).end();
      return;
    }
    const dialect = dialectOf(method, path);
    requests.push({ ...(scenario ? { scenario } : {}), method, path, dialect, headers: redactHeaders(req.headers), body });
    const { status, rendered } = answer(dialect, body, nextId);
    const ids = { "request-id": `req_capture_${requests.length}`, "x-request-id": `req_capture_${requests.length}` };
    if (rendered.events) {
      res.writeHead(status, { "content-type": "text/event-stream", "cache-control": "no-cache", ...ids });
      for (const event of rendered.events) res.write(event);
      res.end();
      return;
    }
    res.writeHead(status, { "content-type": "application/json", ...ids });
    res.end(JSON.stringify(rendered.json));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get requests() {
      return requests;
    },
    take() {
      const taken = requests;
      requests = [];
      return taken;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
