import semver from "semver";
import * as v from "valibot";
import { ServiceError } from "../errors.js";
import { nowIso } from "../../storage/ids.js";
import type { Release, Rollout } from "../../storage/repos/releases.js";
import { decideUpdate, effectivePercentage, etagOf } from "./check.js";
import { CHANNELS, ChannelSchema, Component, Version, precedence } from "./versions.js";
import { updatesDomain } from "./deps.js";

const SIGNED_IN = { kinds: ["session", "gateway_key", "service"] } as const;
const OPERATORS = { kinds: ["session", "gateway_key", "service"], operator: true } as const;

const Percentage = v.pipe(
  v.union([v.number(), v.pipe(v.string(), v.regex(/^\d+(\.\d+)?$/), v.transform(Number))], "percentage must be a number from 0 to 100"),
  v.number(),
  v.minValue(0, "percentage must be from 0 to 100"),
  v.maxValue(100, "percentage must be from 0 to 100"),
);
const IsoDate = (field: string) =>
  v.pipe(
    v.string(`${field} must be an ISO 8601 date`),
    v.isoTimestamp(`${field} must be an ISO 8601 date-time such as 2030-01-31T12:00:00Z`),
  );

const ReleaseBody = v.pipe(
  v.object({
    component: Component,
    version: Version("version"),
    channel: v.optional(ChannelSchema, "stable"),
    notes: v.optional(v.pipe(v.string("notes must be a string"), v.maxLength(20_000, "notes: at most 20000 characters")), ""),
    url: v.pipe(
      v.string("url must be a string"),
      v.url("url must be an absolute URL"),
      v.regex(/^https?:\/\//i, "url must be http or https"),
      v.maxLength(2048),
    ),
    sha256: v.pipe(
      v.string("sha256 must be a string"),
      v.regex(/^[0-9a-fA-F]{64}$/, "sha256 must be 64 hexadecimal characters"),
      v.toLowerCase(),
    ),
    size: v.pipe(
      v.number("size must be a number of bytes"),
      v.integer("size must be an integer"),
      v.minValue(1, "size must be at least 1"),
      v.maxValue(Number.MAX_SAFE_INTEGER),
    ),
    minimumVersion: v.optional(Version("minimumVersion")),
    mandatory: v.optional(v.boolean("mandatory must be a boolean"), false),
    /** Staged from the start: a rollout at this percentage is created with the release (default: every client). */
    percentage: v.optional(Percentage),
  }),
  v.check(
    (body) => body.minimumVersion === undefined || semver.lte(body.minimumVersion, body.version),
    "minimumVersion must not be above version",
  ),
);

const ReleaseView = v.object({
  component: v.string(),
  version: v.string(),
  channel: v.picklist(CHANNELS),
  notes: v.string(),
  url: v.string(),
  sha256: v.string(),
  size: v.number(),
  minimumVersion: v.optional(v.string()),
  mandatory: v.boolean(),
  publishedAt: v.string(),
  rollout: v.object({ percentage: v.number(), state: v.string(), startAt: v.optional(v.string()), effectivePercentage: v.number() }),
});

function releaseView(release: Release, rollout: Rollout | null | undefined) {
  const { publishedBy: _by, ...rest } = release;
  return {
    ...rest,
    rollout: {
      percentage: rollout?.percentage ?? 100,
      state: rollout?.state ?? "active",
      ...(rollout?.startAt ? { startAt: rollout.startAt } : {}),
      effectivePercentage: effectivePercentage(rollout ?? undefined),
    },
  };
}

function rolloutView(rollout: Rollout) {
  const { updatedBy: _by, ...rest } = rollout;
  return { ...rest, effectivePercentage: effectivePercentage(rollout) };
}

const byVersionDesc = (a: { version: string }, b: { version: string }) => semver.rcompare(a.version, b.version);

/** Component updates (docs/interface.md 4.4 "/updates", docs/interface.md 9; docs/updates.md). */
export const updateMethods = [
  updatesDomain.method({
    name: "updates.releases.list",
    summary: "Published releases, newest version first; optionally one component and the channels a client on `channel` sees.",
    input: v.object({ component: v.optional(Component), channel: v.optional(ChannelSchema) }),
    auth: SIGNED_IN,
    output: v.object({ data: v.array(ReleaseView) }),
    http: [{ surface: "gateway", method: "GET", path: "/updates/releases" }],
    async handler(params, ctx) {
      const repo = ctx.deps.releases;
      let releases = await repo.list(params.component);
      if (params.channel) {
        const visible = new Set(CHANNELS.slice(0, CHANNELS.indexOf(params.channel) + 1));
        releases = releases.filter((release) => visible.has(release.channel));
      }
      const rollouts = new Map((await repo.listRollouts(params.component)).map((r) => [`${r.component}\u0000${precedence(r.version)}`, r]));
      return {
        data: releases
          .sort(byVersionDesc)
          .map((release) => releaseView(release, rollouts.get(`${release.component}\u0000${precedence(release.version)}`))),
      };
    },
  }),

  updatesDomain.method({
    name: "updates.releases.publish",
    summary: "Publishes a release (operators only). A second release of the same component and version (build metadata ignored) is 409.",
    input: ReleaseBody,
    auth: OPERATORS,
    output: ReleaseView,
    errors: { CONFLICT: {} },
    http: [{ surface: "gateway", method: "POST", path: "/updates/releases", status: 201 }],
    async handler(params, ctx) {
      const { percentage, ...fields } = params;
      const now = nowIso();
      const release: Release = { ...fields, publishedAt: now, publishedBy: ctx.principal.userId };
      if (release.minimumVersion === undefined) delete release.minimumVersion;
      const key = precedence(release.version);
      if (!(await ctx.deps.releases.claim(release.component, key))) throw conflict(release);
      // The rollout goes first: a staged release must never be visible at 100 % for a moment.
      let rollout: Rollout | null = null;
      if (percentage !== undefined) {
        rollout = {
          component: release.component,
          version: release.version,
          channel: release.channel,
          percentage,
          state: "active",
          createdAt: now,
          updatedAt: now,
          updatedBy: ctx.principal.userId,
        };
        await ctx.deps.releases.putRollout(rollout, key);
      }
      await ctx.deps.releases.put(release, key);
      return releaseView(release, rollout);
    },
  }),

  updatesDomain.method({
    name: "updates.rollouts.set",
    summary:
      "Stages a published release: sets its rollout percentage (0-100; raise, lower), pauses it (`state: paused`), " +
      "resumes it (`active`) or rolls it back (`rolled_back`: offered to nobody). Operators only.",
    input: v.object({
      component: Component,
      version: Version("version"),
      channel: v.optional(ChannelSchema),
      percentage: v.optional(Percentage),
      state: v.optional(v.picklist(["active", "paused", "rolled_back"], "state must be active, paused or rolled_back")),
      startAt: v.optional(v.nullable(IsoDate("startAt"))),
    }),
    auth: OPERATORS,
    output: v.object({
      component: v.string(),
      version: v.string(),
      channel: v.string(),
      percentage: v.number(),
      state: v.string(),
      effectivePercentage: v.number(),
    }),
    errors: { NOT_FOUND: {}, BAD_REQUEST: {} },
    http: [{ surface: "gateway", method: "POST", path: "/updates/rollouts" }],
    async handler(params, ctx) {
      const key = precedence(params.version);
      const release = await ctx.deps.releases.get(params.component, key);
      if (!release)
        throw new ServiceError("NOT_FOUND", `No release ${params.component} ${params.version}: publish it at POST /updates/releases first`);
      if (params.channel && params.channel !== release.channel) {
        throw new ServiceError(
          "BAD_REQUEST",
          `Release ${params.component} ${release.version} is on channel ${release.channel}, not ${params.channel}`,
        );
      }
      if (params.percentage === undefined && params.state === undefined && params.startAt === undefined) {
        throw new ServiceError("BAD_REQUEST", "Give percentage, state or startAt");
      }
      const now = nowIso();
      const previous = await ctx.deps.releases.getRollout(params.component, key);
      const rollout: Rollout = {
        component: release.component,
        version: release.version,
        channel: release.channel,
        percentage: params.percentage ?? previous?.percentage ?? 100,
        state: params.state ?? previous?.state ?? "active",
        createdAt: previous?.createdAt ?? now,
        updatedAt: now,
        updatedBy: ctx.principal.userId,
      };
      const startAt = params.startAt === undefined ? previous?.startAt : (params.startAt ?? undefined);
      if (startAt) rollout.startAt = new Date(startAt).toISOString();
      await ctx.deps.releases.putRollout(rollout, key);
      return rolloutView(rollout);
    },
  }),

  updatesDomain.method({
    name: "updates.rollouts.list",
    summary: "Rollouts, optionally of one component.",
    input: v.object({ component: v.optional(Component) }),
    auth: SIGNED_IN,
    output: v.object({
      data: v.array(
        v.object({
          component: v.string(),
          version: v.string(),
          channel: v.string(),
          percentage: v.number(),
          effectivePercentage: v.number(),
          state: v.string(),
          startAt: v.optional(v.string()),
          createdAt: v.string(),
          updatedAt: v.string(),
        }),
      ),
    }),
    http: [{ surface: "gateway", method: "GET", path: "/updates/rollouts" }],
    async handler(params, ctx) {
      return { data: (await ctx.deps.releases.listRollouts(params.component)).sort(byVersionDesc).map(rolloutView) };
    },
  }),

  updatesDomain.method({
    name: "updates.check",
    summary:
      "Whether a component at currentVersion on a channel has an update for this client (clientId query or " +
      "X-Client-Id header): the highest release whose rollout includes the client. Cacheable (Cache-Control, ETag; " +
      "If-None-Match answers 304).",
    input: v.object({
      component: Component,
      currentVersion: Version("currentVersion"),
      channel: v.optional(ChannelSchema, "stable"),
      clientId: v.optional(
        v.pipe(v.string("clientId must be a string"), v.regex(/^[\w.:@-]{1,128}$/, "clientId: 1-128 letters, digits or _ . : @ -")),
      ),
    }),
    auth: SIGNED_IN,
    output: v.object({
      updateAvailable: v.boolean(),
      current: v.string(),
      channel: v.string(),
      latest: v.nullable(
        v.object({ version: v.string(), url: v.string(), sha256: v.string(), size: v.number(), notes: v.string(), mandatory: v.boolean() }),
      ),
    }),
    http: [{ surface: "gateway", method: "GET", path: "/updates/check", headerParams: { "x-client-id": "clientId" } }],
    async handler(params, ctx) {
      const [releases, rollouts] = await Promise.all([
        ctx.deps.releases.list(params.component),
        ctx.deps.releases.listRollouts(params.component),
      ]);
      const answer = decideUpdate(params, releases, new Map(rollouts.map((rollout) => [precedence(rollout.version), rollout])));
      // Private: the answer depends on the client id. Short: a rollout change reaches clients within a minute.
      ctx.responseHeaders.set("cache-control", "private, max-age=60");
      ctx.responseHeaders.set("etag", etagOf(answer));
      ctx.responseHeaders.set("vary", "X-Client-Id, Authorization, X-API-Key");
      return answer;
    },
  }),
];

function conflict(release: Release): ServiceError {
  return new ServiceError("CONFLICT", `Release ${release.component} ${precedence(release.version)} is already published`, {
    details: { component: release.component, version: release.version },
  });
}
