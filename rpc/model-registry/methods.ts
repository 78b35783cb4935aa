import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { nowIso } from "../../storage/ids.js";
import type { ModelEntry } from "../../storage/repos/model-registry.js";
import { changedFields, recordAudit } from "../audit.js";
import { modelRegistryDomain } from "./deps.js";

const SIGNED_IN = { kinds: ["session", "gateway_key", "service"] } as const;
const OPERATORS = { kinds: ["session", "gateway_key", "service"], operator: true } as const;

const ModelId = v.pipe(
  v.string("model_id must be a string"),
  v.regex(/^[\w.:/-]{1,128}$/, "model ids are letters, digits and _ . : / - (max 128)"),
);
const Text = (field: string, max: number) =>
  v.pipe(
    v.string(`${field} must be a string`),
    v.trim(),
    v.minLength(1, `${field} must not be empty`),
    v.maxLength(max, `${field}: at most ${max} characters`),
  );
const Count = (field: string) =>
  v.pipe(
    v.number(`${field} must be a number`),
    v.integer(`${field} must be an integer`),
    v.minValue(1, `${field} must be at least 1`),
    v.maxValue(100_000_000),
  );
const Modality = v.picklist(["text", "image", "audio", "video", "file"], "modalities: text, image, audio, video or file");
const Status = v.picklist(["active", "deprecated", "disabled"], "status must be active, deprecated or disabled");

/** The editable fields; every one optional on update. */
const Fields = {
  displayName: v.optional(Text("displayName", 200)),
  provider: v.optional(Text("provider", 100)),
  upstreamModel: v.optional(Text("upstreamModel", 200)),
  contextWindow: v.optional(Count("contextWindow")),
  maxOutputTokens: v.optional(v.nullable(Count("maxOutputTokens"))),
  price: v.optional(
    v.object(
      {
        input: v.pipe(v.number("price.input must be a number"), v.minValue(0)),
        output: v.pipe(v.number("price.output must be a number"), v.minValue(0)),
      },
      "price must be {input, output}",
    ),
  ),
  modalities: v.optional(
    v.object(
      {
        input: v.pipe(v.array(Modality), v.minLength(1), v.maxLength(5)),
        output: v.pipe(v.array(Modality), v.minLength(1), v.maxLength(5)),
      },
      "modalities must be {input: [...], output: [...]}",
    ),
  ),
  capabilities: v.optional(
    v.object(
      { streaming: v.optional(v.boolean()), tools: v.optional(v.boolean()), vision: v.optional(v.boolean()) },
      "capabilities must be {streaming, tools, vision}",
    ),
  ),
  status: v.optional(Status),
  statusNote: v.optional(v.nullable(Text("statusNote", 300))),
  tags: v.optional(
    v.pipe(
      v.array(v.pipe(v.string(), v.regex(/^[a-z0-9][a-z0-9._-]{0,31}$/, "tags: lowercase letters, digits, . _ - (1-32)"))),
      v.maxLength(32, "at most 32 tags"),
    ),
  ),
};
type Patch = v.InferOutput<v.ObjectSchema<typeof Fields, undefined>>;

const EntryView = v.object({
  id: v.string(),
  displayName: v.string(),
  provider: v.string(),
  upstreamModel: v.string(),
  contextWindow: v.number(),
  maxOutputTokens: v.nullable(v.number()),
  price: v.object({ input: v.number(), output: v.number() }),
  modalities: v.object({ input: v.array(v.string()), output: v.array(v.string()) }),
  capabilities: v.object({ streaming: v.boolean(), tools: v.boolean(), vision: v.boolean() }),
  status: Status,
  deprecatedAt: v.optional(v.string()),
  statusNote: v.optional(v.string()),
  tags: v.array(v.string()),
  served: v.boolean(),
  createdAt: v.string(),
  updatedAt: v.string(),
});

function applyPatch(entry: ModelEntry, patch: Patch, now: string): ModelEntry {
  const next: ModelEntry = { ...entry, updatedAt: now };
  for (const key of [
    "displayName",
    "provider",
    "upstreamModel",
    "contextWindow",
    "maxOutputTokens",
    "price",
    "modalities",
    "tags",
  ] as const) {
    if (patch[key] !== undefined) (next as unknown as Record<string, unknown>)[key] = patch[key];
  }
  if (patch.capabilities) next.capabilities = { ...entry.capabilities, ...patch.capabilities };
  if (patch.statusNote !== undefined) {
    if (patch.statusNote === null) delete next.statusNote;
    else next.statusNote = patch.statusNote;
  }
  if (patch.status && patch.status !== entry.status) {
    next.status = patch.status;
    if (patch.status === "deprecated") next.deprecatedAt = now;
    else delete next.deprecatedAt;
  }
  return next;
}

async function entryOr404(
  id: string,
  ctx: { deps: { modelRegistry: { repo: { get(id: string): Promise<ModelEntry | null> } } } },
): Promise<ModelEntry> {
  const entry = await ctx.deps.modelRegistry.repo.get(id);
  if (!entry) throw new ServiceError("NOT_FOUND", `Model not found in the registry: ${id}`);
  return entry;
}

/** The model registry (docs/interface.md 4.4 "/model-registry"; docs/model-registry.md); distinct from /models. */
export const modelRegistryMethods = [
  modelRegistryDomain.method({
    name: "registry.models.list",
    formerNames: ["modelRegistry.list"],
    summary:
      "Every registry entry: catalog metadata and provider data, including models the router does not serve. Optional filter by status or tag.",
    input: v.object({ status: v.optional(Status), tag: v.optional(v.string()) }),
    auth: SIGNED_IN,
    output: v.object({ data: v.array(EntryView) }),
    http: [{ surface: "gateway", method: "GET", path: "/model-registry/models" }],
    async handler(params, ctx) {
      let entries = await ctx.deps.modelRegistry.repo.list();
      if (params.status) entries = entries.filter((entry) => entry.status === params.status);
      if (params.tag) entries = entries.filter((entry) => entry.tags.includes(params.tag!));
      return { data: entries };
    },
  }),

  modelRegistryDomain.method({
    name: "registry.models.create",
    formerNames: ["modelRegistry.create"],
    summary: "Adds a registry entry (operators only); 409 when the id exists (PATCH it instead).",
    input: v.object({ id: ModelId, ...Fields }),
    auth: OPERATORS,
    output: EntryView,
    errors: { CONFLICT: {} },
    http: [{ surface: "gateway", method: "POST", path: "/model-registry/models", status: 201 }],
    async handler(params, ctx) {
      const registry = ctx.deps.modelRegistry;
      if (!(await registry.repo.claim(params.id)))
        throw new ServiceError(
          "CONFLICT",
          `Model ${params.id} is already in the registry; PATCH /model-registry/models/${params.id} updates it`,
        );
      const now = nowIso();
      const base: ModelEntry = {
        id: params.id,
        displayName: params.id,
        provider: "external",
        upstreamModel: params.id,
        contextWindow: 8192,
        maxOutputTokens: null,
        price: { input: 0, output: 0 },
        modalities: { input: ["text"], output: ["text"] },
        capabilities: { streaming: true, tools: false, vision: false },
        status: "active",
        tags: [],
        served: registry.serves(params.id),
        createdAt: now,
        updatedAt: now,
      };
      const saved = await registry.save(applyPatch(base, params, now));
      await recordAudit(ctx, { action: "model.created", target: params.id, changes: changedFields(params, ["id"]) });
      return saved;
    },
  }),

  modelRegistryDomain.method({
    name: "registry.models.get",
    formerNames: ["modelRegistry.get"],
    summary: "One registry entry; an unknown id is 404.",
    input: v.object({ model_id: ModelId }),
    auth: SIGNED_IN,
    output: EntryView,
    errors: { NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "GET", path: "/model-registry/models/:model_id" }],
    handler: (params, ctx) => entryOr404(params.model_id, ctx),
  }),

  modelRegistryDomain.method({
    name: "registry.models.update",
    formerNames: ["modelRegistry.update"],
    summary:
      "Updates a registry entry (operators only). `status: disabled` makes the router refuse the model (403 listing " +
      "usable ids); `deprecated` adds the Deprecation and X-Model-Warning headers to Account and Gateway chat answers " +
      "(the Platform adds no header: the notice is in the catalog entry).",
    input: v.object({ model_id: ModelId, ...Fields }),
    auth: OPERATORS,
    output: EntryView,
    errors: { NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "PATCH", path: "/model-registry/models/:model_id" }],
    async handler(params, ctx) {
      const entry = await entryOr404(params.model_id, ctx);
      const saved = await ctx.deps.modelRegistry.save(applyPatch(entry, params, nowIso()));
      await recordAudit(ctx, { action: "model.updated", target: params.model_id, changes: changedFields(params, ["model_id"]) });
      return saved;
    },
  }),

  modelRegistryDomain.method({
    name: "registry.models.health",
    formerNames: ["modelRegistry.health"],
    summary:
      "healthy, degraded or down, with each deployment (cooling down or not): passive (error rate, p50/p95 latency " +
      "and time to first token over the last 5 minutes of real traffic) and active (a probe of the upstream's models " +
      "list, cached MODEL_HEALTH_TTL_SECONDS), with the last error.",
    input: v.object({ model_id: ModelId }),
    auth: SIGNED_IN,
    output: v.object({
      id: v.string(),
      status: v.picklist(["healthy", "degraded", "down"]),
      reasons: v.array(v.string()),
      passive: v.object({
        windowSeconds: v.number(),
        requests: v.number(),
        errors: v.number(),
        errorRate: v.nullable(v.number()),
        latencyMs: v.object({ p50: v.nullable(v.number()), p95: v.nullable(v.number()) }),
        ttftMs: v.object({ p50: v.nullable(v.number()), p95: v.nullable(v.number()) }),
        lastError: v.nullable(v.object({ message: v.string(), at: v.string() })),
      }),
      active: v.nullable(v.object({ cached: v.boolean() })),
      lastError: v.nullable(v.object({ message: v.string(), at: v.string() })),
      checkedAt: v.string(),
      deployments: v.array(
        v.object({
          index: v.number(),
          provider: v.string(),
          upstreamModel: v.string(),
          weight: v.number(),
          inFlight: v.number(),
          coolingDown: v.boolean(),
          cooldownUntil: v.nullable(v.string()),
        }),
      ),
    }),
    errors: { NOT_FOUND: {} },
    http: [{ surface: "gateway", method: "GET", path: "/model-registry/models/:model_id/health" }],
    async handler(params, ctx) {
      const entry = await entryOr404(params.model_id, ctx);
      return ctx.deps.modelRegistry.health(entry);
    },
  }),
];
