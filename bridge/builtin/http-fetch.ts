import type { ClientRequest, IncomingMessage } from "node:http";
import { errorResult, okResult, type BuiltinTool } from "./internal/tool.js";
import { AddressRefused, OutboundGuard, type ResolveHost } from "../../rpc/outbound/outbound-guard.js";

export interface HttpFetchOptions {
  /**
   * Lets the tool reach loopback and private addresses. Off in every deployment (SSRF); tests
   * turn it on to exercise the success path against a local server without any network.
   */
  allowPrivateAddresses?: boolean;
  /** Name resolution (default: the system resolver); tests inject one (docs/security.md). */
  resolveHost?: ResolveHost;
}

const DEFAULT_MAX_BYTES = 256 * 1024;
const MAX_BYTES = 1024 * 1024;
const MAX_REDIRECTS = 5;

interface Fetched {
  status: number;
  url: string;
  contentType: string;
  body: Buffer;
  truncated: boolean;
  location?: string;
}

function once(
  url: URL,
  init: { method: string; headers: Record<string, string>; body?: string; maxBytes: number; signal: AbortSignal; guard: OutboundGuard },
): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    // The guard checks a literal address here and a name on the address actually connected
    // to (no DNS-rebinding window), as for every outbound path (OutboundGuard.open).
    let req: ClientRequest;
    try {
      req = init.guard.open(url, {
        method: init.method,
        headers: { "user-agent": "chat-agent-tool-gateway/http_fetch", ...init.headers },
        // A fresh socket per fetch (agent: false): nothing kept alive between users' calls.
        agent: false,
        signal: init.signal,
      });
    } catch (error) {
      reject(error);
      return;
    }
    req.on("error", reject);
    req.on("response", (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      let truncated = false;
      const done = () =>
        resolve({
          status: res.statusCode ?? 0,
          url: url.toString(),
          contentType: String(res.headers["content-type"] ?? ""),
          body: Buffer.concat(chunks),
          truncated,
          location: typeof res.headers.location === "string" ? res.headers.location : undefined,
        });
      res.on("data", (chunk: Buffer) => {
        if (truncated) return;
        const room = init.maxBytes - size;
        if (chunk.length > room) {
          chunks.push(chunk.subarray(0, room));
          size = init.maxBytes;
          truncated = true;
          // Stop downloading past the cap instead of buffering a huge body.
          res.destroy();
          done();
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
      });
      res.on("end", done);
      res.on("error", (error) => (truncated ? undefined : reject(error)));
    });
    if (init.body !== undefined) req.write(init.body);
    req.end();
  });
}

export function httpFetch(options: HttpFetchOptions = {}): BuiltinTool {
  const guard = new OutboundGuard({ allowPrivate: options.allowPrivateAddresses === true, resolve: options.resolveHost });
  return {
    name: "http_fetch",
    description:
      "Fetches a public http(s) URL with GET or POST and returns the status and the body as text (capped in size). " +
      "Private, loopback and link-local addresses are refused, whatever the host name resolves to.",
    category: "web",
    inputSchema: {
      type: "object",
      properties: {
        url: { type: "string", format: "uri", pattern: "^https?://", maxLength: 4096, description: "An absolute http:// or https:// URL." },
        method: { type: "string", enum: ["GET", "POST"], default: "GET" },
        headers: { type: "object", additionalProperties: { type: "string" }, description: "Request headers." },
        body: { type: "string", maxLength: MAX_BYTES, description: "Request body (POST)." },
        max_bytes: {
          type: "integer",
          minimum: 1,
          maximum: MAX_BYTES,
          default: DEFAULT_MAX_BYTES,
          description: "Response bytes kept; the rest is cut off.",
        },
        timeout_seconds: { type: "number", exclusiveMinimum: 0, maximum: 120, description: "Bounded by the gateway's tool timeout." },
      },
      required: ["url"],
      additionalProperties: false,
    },
    async run(args, callOptions) {
      const method = (args.method as string | undefined) ?? "GET";
      const maxBytes = (args.max_bytes as number | undefined) ?? DEFAULT_MAX_BYTES;
      const timeoutMs = Math.min(callOptions.timeoutMs, ((args.timeout_seconds as number | undefined) ?? Infinity) * 1000);
      const signals = [AbortSignal.timeout(timeoutMs), ...(callOptions.signal ? [callOptions.signal] : [])];
      const signal = AbortSignal.any(signals);
      let url = new URL(args.url as string);
      let current = { method, body: method === "POST" ? ((args.body as string | undefined) ?? "") : undefined };
      try {
        for (let hop = 0; ; hop += 1) {
          if (url.protocol !== "http:" && url.protocol !== "https:")
            return errorResult(`Refused: only http and https URLs are fetched (${url.protocol})`);
          const fetched = await once(url, {
            ...current,
            headers: (args.headers as Record<string, string> | undefined) ?? {},
            maxBytes,
            signal,
            guard,
          });
          // Redirects are followed by hand so every hop goes through the address check.
          if (fetched.location && fetched.status >= 300 && fetched.status < 400 && hop < MAX_REDIRECTS) {
            url = new URL(fetched.location, url);
            if (fetched.status !== 307 && fetched.status !== 308) current = { method: "GET", body: undefined };
            continue;
          }
          const text = fetched.body.toString("utf8");
          const structured = {
            url: fetched.url,
            status: fetched.status,
            content_type: fetched.contentType,
            body: text,
            bytes: fetched.body.length,
            truncated: fetched.truncated,
          };
          return okResult(
            `HTTP ${fetched.status} ${fetched.url}${fetched.truncated ? ` (truncated at ${maxBytes} bytes)` : ""}\n\n${text}`,
            structured,
          );
        }
      } catch (error) {
        if (error instanceof AddressRefused) return errorResult(error.message);
        if (signal.aborted) return errorResult(`Timed out after ${Math.round(timeoutMs)} ms fetching ${url}`);
        return errorResult(`Fetch failed: ${(error as Error).message}`);
      }
    },
  };
}
