import { createHash } from "node:crypto";
import * as v from "valibot";
import { RawReply, type RawRequest } from "../define.js";
import { ServiceError } from "../errors.js";
import { nowIso } from "../../storage/ids.js";
import { ArtifactsRepo, type Artifact } from "../../storage/repos/artifacts.js";
import { parseParams, queryInt, RawRequestInput } from "../validate.js";
import { requireActive, requireWorkspace } from "./access.js";
import { workspacesDomain } from "./deps.js";

const AUTH = { kinds: ["session", "gateway_key"] } as const;
const Id = (field: string) => v.pipe(v.string(`${field} must be a string`), v.minLength(1, `${field} is required`), v.maxLength(128));
const Name = v.pipe(
  v.string("name must be a string"),
  v.trim(),
  v.minLength(1, "name is required"),
  v.maxLength(255, "name: at most 255 characters"),
  v.check((name) => !/[/\\\u0000-\u001f\u007f]/.test(name), "name must not contain slashes or control characters"),
);
const ContentType = v.pipe(
  v.string("contentType must be a string"),
  v.regex(/^[\w.+-]+\/[\w.+-]+(\s*;[^\r\n]*)?$/, "contentType must be a media type such as text/plain"),
  v.maxLength(255),
);
const Base64 = v.pipe(
  v.string("content must be a base64 string"),
  v.minLength(1, "content is empty"),
  v.check((text) => text.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(text), "content is not valid base64"),
);
const JsonUpload = v.object({ name: Name, contentType: v.optional(ContentType, "application/octet-stream"), content: Base64 });

export const ArtifactView = v.object({
  id: v.string(),
  workspaceId: v.string(),
  name: v.string(),
  contentType: v.string(),
  size: v.number(),
  sha256: v.string(),
  createdBy: v.string(),
  createdAt: v.string(),
});

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\b/i;

/** What an upload carries: JSON `{name, contentType, content: base64}`, or the raw bytes with `?name=` and their Content-Type. */
function readUpload(request: RawRequest): { name: string; contentType: string; content: Uint8Array } {
  const type = (request.headers["content-type"] ?? "").trim();
  if (JSON_TYPE.test(type)) {
    let body: unknown;
    try {
      body = JSON.parse(Buffer.from(request.body ?? new Uint8Array()).toString("utf8"));
    } catch {
      throw new ServiceError("PARSE_ERROR", "Malformed JSON in request body");
    }
    const upload = parseParams(JsonUpload, body);
    return { name: upload.name, contentType: upload.contentType, content: new Uint8Array(Buffer.from(upload.content, "base64")) };
  }
  const name = parseParams(v.object({ name: Name }, "name is required (query ?name=)"), {
    name: new URLSearchParams(request.search).get("name") ?? undefined,
  }).name;
  if (!request.body?.byteLength)
    throw new ServiceError("VALIDATION_FAILED", "Invalid request: the body is empty; send the file's bytes", {
      details: { issues: [{ path: "body", message: "empty" }] },
    });
  return { name, contentType: type ? parseParams(ContentType, type) : "application/octet-stream", content: request.body };
}

const notFound = (id: string) => new ServiceError("NOT_FOUND", `Artifact not found: ${id}`);

function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/** Artifacts of a workspace (docs/interface.md 4.4 `/workspaces/{id}/artifacts`, docs/tenants.md "Artifacts"). */
export const artifactMethods = [
  workspacesDomain.method({
    name: "workspaces.artifacts.upload",
    summary:
      "Members: upload a file to an active workspace, as the raw body (its Content-Type, `?name=`) or as JSON " +
      "`{name, contentType, content: base64}`; within GATEWAY_MAX_PAYLOAD_BYTES (413 past it). Stored with its size " +
      "and SHA-256.",
    input: v.object({ workspace_id: Id("workspace_id"), request: RawRequestInput }),
    auth: AUTH,
    output: ArtifactView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {}, VALIDATION_FAILED: {}, PAYLOAD_TOO_LARGE: {}, PARSE_ERROR: {} },
    http: [{ surface: "gateway", method: "POST", path: "/workspaces/:workspace_id/artifacts", status: 201, raw: true }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "member");
      requireActive(workspace, "no artifacts are added to it");
      const upload = readUpload(params.request);
      const artifact: Artifact = {
        id: ArtifactsRepo.newId(),
        workspaceId: workspace.id,
        name: upload.name,
        contentType: upload.contentType,
        size: upload.content.byteLength,
        sha256: createHash("sha256").update(upload.content).digest("hex"),
        createdBy: ctx.principal.userId,
        createdAt: nowIso(),
      };
      return ctx.deps.artifacts.put(artifact, upload.content);
    },
  }),

  workspacesDomain.method({
    name: "workspaces.artifacts.list",
    summary:
      "The workspace's artifacts, oldest first, `limit` at a time (default 50, at most 200); `next` is the `cursor` of the next page.",
    input: v.object({
      workspace_id: Id("workspace_id"),
      limit: v.optional(queryInt(1, 200), 50),
      cursor: v.optional(v.pipe(v.string(), v.regex(/^art_[0-9a-z]+$/, "cursor must be a `next` value from a previous page"))),
    }),
    auth: AUTH,
    output: v.object({ artifacts: v.array(ArtifactView), next: v.optional(v.string()) }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/workspaces/:workspace_id/artifacts" }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "viewer");
      const page = await ctx.deps.artifacts.page(workspace.id, params.limit, params.cursor);
      return { artifacts: page.items, ...(page.next ? { next: page.next } : {}) };
    },
  }),

  workspacesDomain.method({
    name: "workspaces.artifacts.get",
    summary: "An artifact's metadata: name, content type, size, SHA-256.",
    input: v.object({ workspace_id: Id("workspace_id"), artifact_id: Id("artifact_id") }),
    auth: AUTH,
    output: ArtifactView,
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/workspaces/:workspace_id/artifacts/:artifact_id" }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "viewer");
      const artifact = await ctx.deps.artifacts.get(workspace.id, params.artifact_id);
      if (!artifact) throw notFound(params.artifact_id);
      return artifact;
    },
  }),

  workspacesDomain.method({
    name: "workspaces.artifacts.content",
    summary:
      "An artifact's bytes with its Content-Type, an ETag (its SHA-256; If-None-Match answers 304) and Content-Disposition: attachment.",
    input: v.object({ workspace_id: Id("workspace_id"), artifact_id: Id("artifact_id"), request: RawRequestInput }),
    auth: AUTH,
    output: v.pipe(v.unknown(), v.description("The artifact's bytes with its content type, ETag and Content-Disposition")),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "GET", path: "/workspaces/:workspace_id/artifacts/:artifact_id/content", raw: true }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "viewer");
      const artifact = await ctx.deps.artifacts.get(workspace.id, params.artifact_id);
      if (!artifact) throw notFound(params.artifact_id);
      const etag = `"${artifact.sha256}"`;
      const headers = new Headers({ etag, "cache-control": "private, no-cache" });
      const match = params.request.headers["if-none-match"];
      if (match?.split(",").some((tag) => tag.trim().replace(/^W\//, "") === etag || tag.trim() === "*"))
        return new RawReply(304, headers, null);
      const content = await ctx.deps.artifacts.content(artifact.id);
      if (!content) throw notFound(params.artifact_id);
      headers.set("content-type", artifact.contentType);
      headers.set("content-length", String(content.byteLength));
      headers.set("content-disposition", contentDisposition(artifact.name));
      headers.set("x-content-type-options", "nosniff");
      return new RawReply(200, headers, content);
    },
  }),

  workspacesDomain.method({
    name: "workspaces.artifacts.delete",
    summary: "Owners: delete an artifact and its bytes (also in an archived workspace).",
    input: v.object({ workspace_id: Id("workspace_id"), artifact_id: Id("artifact_id") }),
    auth: AUTH,
    output: v.object({ success: v.boolean(), id: v.string() }),
    errors: { NOT_FOUND: {}, FORBIDDEN: {} },
    http: [{ surface: "gateway", method: "DELETE", path: "/workspaces/:workspace_id/artifacts/:artifact_id" }],
    async handler(params, ctx) {
      const { workspace } = await requireWorkspace(ctx.deps, ctx.principal, params.workspace_id, "owner");
      const artifact = await ctx.deps.artifacts.get(workspace.id, params.artifact_id);
      if (!artifact) throw notFound(params.artifact_id);
      await ctx.deps.artifacts.remove(artifact);
      return { success: true, id: artifact.id };
    },
  }),
];
