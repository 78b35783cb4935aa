import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import { ServiceError } from "../../rpc/errors.js";
import { MAX_JSON_DEPTH, nestsDeeper } from "../../rpc/validate.js";

const tooLarge = (limit: number) => new ServiceError("PAYLOAD_TOO_LARGE", `Request body exceeds the limit of ${limit} bytes`);

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\b/i;

/**
 * The body stopped arriving (the client went away, or was cut as too slow: docs/security.md
 * "Slow clients"): a 400 nobody may read, logged as the client's fault, not as an error.
 */
async function received<T>(read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (error) {
    if (error instanceof ServiceError) throw error;
    throw new ServiceError("BAD_REQUEST", "The request body was not received completely", { cause: error });
  }
}

/** A JSON body from its bytes: valid UTF-8 (400 otherwise), JSON (PARSE_ERROR), at most MAX_JSON_DEPTH deep (400). */
export function parseJsonBytes(bytes: Buffer): unknown {
  // The decoder would replace invalid sequences and pass the body on altered: it is refused instead.
  if (!isUtf8(bytes)) throw new ServiceError("PARSE_ERROR", "Request body is not valid UTF-8");
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new ServiceError("PARSE_ERROR", "Malformed JSON in request body");
  }
  if (nestsDeeper(value, MAX_JSON_DEPTH))
    throw new ServiceError("BAD_REQUEST", `Request body nests deeper than ${MAX_JSON_DEPTH} levels`, {
      details: { limit: MAX_JSON_DEPTH },
    });
  return value;
}

/** The Node request under srvx's web Request, when there is one. */
function nodeRequestOf(request: Request): IncomingMessage | undefined {
  return (request as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
}

/**
 * Reads a JSON body, refusing more than `limit` bytes whether or not Content-Length says so
 * (chunked uploads are counted as they arrive and cut off at the limit).
 * Returns undefined for an empty body.
 *
 * Not h3's `assertBodySize`: it wraps every body in a counting web stream behind a Proxy,
 * which gives up the one-piece read below that the MCP tools/call benchmark measured
 * (docs/benchmarks-bridge.md); its errors would also need mapping to this service's 413/400.
 */
export async function readJsonBody(request: Request, limit: number): Promise<unknown> {
  const header = request.headers.get("content-length");
  const declared = header === null ? NaN : Number(header);
  if (declared > limit) throw tooLarge(limit);
  // A JSON body with a Content-Length under the limit is read in one piece (the HTTP parser
  // delivers exactly that many bytes): this skips the web-stream reader on the hot MCP
  // tools/call and chat paths (docs/benchmarks-bridge.md). `request.body` is not touched
  // first: on srvx's Node request that getter alone wraps the socket in a web stream, which
  // `text()` would then read through; untouched, `text()` reads the Node request directly.
  if (Number.isInteger(declared) && JSON_TYPE.test((request.headers.get("content-type") ?? "").trim())) {
    if (declared === 0) return undefined;
    // The bytes, so invalid UTF-8 is seen before a decoder replaces it: from the Node request's
    // own events where there is one (as facade/native-routes.ts reads them), else from the Request.
    const node = nodeRequestOf(request);
    if (node) return readDeclaredJsonBody(node, declared);
    return parseJsonBytes(Buffer.from(await received(request.arrayBuffer())));
  }
  if (!request.body) return undefined;

  const bytes = await received(readCapped(request.body, limit));
  if (bytes.byteLength === 0) return undefined;

  const type = request.headers.get("content-type") ?? "";
  if (!JSON_TYPE.test(type.trim())) {
    throw notJson();
  }
  return parseJsonBytes(bytes);
}

/**
 * A body sent without `Content-Type: application/json` on a JSON route: 400 `BAD_REQUEST` on
 * every surface, in its envelope (docs/interface.md 7: the Platform's rule, which is the
 * interface's, "malformed body", made the rule of the Account API, the Gateway and the bridge too).
 */
function notJson(): ServiceError {
  return new ServiceError("BAD_REQUEST", "Content-Type must be application/json");
}

/**
 * readJsonBody() for a Node request that declared its length in `Content-Length` (the caller
 * has checked it against the limit; the HTTP parser delivers exactly that many bytes, so
 * nothing more is counted), read from the request's own events (facade/native-routes.ts). The
 * same answers: undefined when empty, 400 for a body that is not JSON, PARSE_ERROR for
 * malformed JSON, 400 for a body that stopped arriving.
 */
export async function readDeclaredJsonBody(req: IncomingMessage, declared: number): Promise<unknown> {
  if (declared === 0) return undefined;
  if (!JSON_TYPE.test((req.headers["content-type"] ?? "").trim())) {
    req.resume();
    throw notJson();
  }
  const bytes = await received(
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const onData = (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
      };
      const onEnd = () => {
        done();
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      };
      const onError = (error: Error) => {
        done();
        reject(error);
      };
      const onClose = () => {
        done();
        reject(new Error("The connection closed before the body arrived"));
      };
      const done = () => {
        req.off("data", onData);
        req.off("end", onEnd);
        req.off("error", onError);
        req.off("close", onClose);
      };
      // Gone before it was read (the client closed the connection while its call was checked).
      if (req.destroyed) return reject(new Error("The connection closed before the body was read"));
      req.on("data", onData);
      req.on("end", onEnd);
      req.on("error", onError);
      req.on("close", onClose);
    }),
  );
  return parseJsonBytes(bytes);
}

/** Reads a body as bytes, whatever its type, refusing more than `limit` (413); undefined when empty. */
export async function readRawBody(request: Request, limit: number): Promise<Uint8Array | undefined> {
  const header = request.headers.get("content-length");
  if (header !== null && Number(header) > limit) throw tooLarge(limit);
  if (!request.body) return undefined;
  const bytes = await received(readCapped(request.body, limit));
  return bytes.byteLength === 0 ? undefined : new Uint8Array(bytes);
}

/** A body's bytes as they stream in, cut off with 413 past `limit` (chunked uploads included). */
async function readCapped(body: ReadableStream<Uint8Array>, limit: number): Promise<Buffer> {
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}
