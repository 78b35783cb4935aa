import type { IncomingMessage } from "node:http";
import type { H3Event, Middleware } from "h3";
import { ServiceError } from "../rpc/errors.js";
import { refuse, type Observers } from "./transport/instrument.js";
import { surfaceOfPath } from "../rpc/surfaces.js";

/**
 * Paths as they came, before URL parsing resolves them (docs/security.md "Strict paths"): a
 * dot segment (`.`, `..`, literal or percent-encoded), a backslash (literal or `%5C`), or an
 * encoded slash (`%2F`) gets 400 before routing, in the envelope of the surface the path
 * starts in. Otherwise `/api/v1/%2e%2e/%2e%2e/gateway/v1/auth/me` would be resolved to a
 * Gateway route, and a front proxy that allows or denies by path prefix could be walked around.
 *
 * One exception: a model id on `…/models/{id}` and `…/model-registry/models/{id}[/health]`
 * may hold an encoded slash (`org%2Fmodel`): ids such as `meta-llama/Llama-3` are common, and
 * the official `openai` client encodes their slash that way in `models.retrieve`. The id
 * segment is still refused when it holds a dot segment once decoded (`..%2Fadmin`).
 */
const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;
const BACKSLASH = /\\|%5c/i;
const ENCODED_SLASH = /%2f/i;
const MODEL_ID_PATH = /^(?:\/[^/]+)*\/(?:model-registry\/)?models\/([^/]+)(?:\/health)?$/;

/** The reason `rawPath` is refused, or undefined when it is acceptable. */
export function strictPathViolation(rawPath: string): string | undefined {
  if (BACKSLASH.test(rawPath)) return "a backslash";
  const segments = rawPath.split("/");
  if (segments.some((segment) => DOT_SEGMENT.test(segment))) return "a '.' or '..' segment";
  if (!ENCODED_SLASH.test(rawPath)) return undefined;
  // A dot segment hidden behind an encoded slash (`a%2F..%2Fadmin`) is named as such.
  for (const segment of segments) {
    if (!ENCODED_SLASH.test(segment)) continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return "a malformed percent-encoding";
    }
    if (decoded.split("/").some((part) => part === "." || part === "..")) return "a '.' or '..' segment";
  }
  const modelId = MODEL_ID_PATH.exec(rawPath)?.[1];
  const at = modelId === undefined ? -1 : rawPath.lastIndexOf(modelId);
  const elsewhere = at === -1 ? rawPath : rawPath.slice(0, at) + rawPath.slice(at + modelId!.length);
  return ENCODED_SLASH.test(elsewhere) ? "an encoded slash (%2F)" : undefined;
}

/** The request target as the client sent it, path part only. */
function rawPathOf(event: H3Event): string {
  const node = (event.req as { runtime?: { node?: { req?: IncomingMessage } } }).runtime?.node?.req;
  const target = node?.url ?? event.url.pathname;
  const end = target.search(/[?#]/);
  return end === -1 ? target : target.slice(0, end);
}

export function strictPathsMiddleware(observers: Observers): Middleware {
  return (event, next) => {
    const raw = rawPathOf(event);
    // The common path: nothing that URL parsing could resolve or that may hide a separator.
    if (!raw.includes(".") && !raw.includes("%") && !raw.includes("\\")) return next();
    const violation = strictPathViolation(raw);
    if (violation === undefined) return next();
    const surface = surfaceOfPath(raw) ?? "gateway";
    return refuse(event, surface, observers, new ServiceError("BAD_REQUEST", `The request path must not contain ${violation}`));
  };
}
