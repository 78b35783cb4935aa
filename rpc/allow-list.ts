import * as v from "valibot";
import type { Principal } from "./auth.js";
import type { Repos } from "./repos.js";

/**
 * Allow-lists (docs/access-control.md): a key and its tenant may each name the models and the
 * tools a caller may use, as glob patterns (`*` any characters, `?` one). A caller may use what
 * every list that applies allows; a list that is absent (null) allows everything. The model
 * router and the tool catalog apply them, so every surface and dialect is held to the same lists.
 */

/** What a key or a tenant allows; null or absent: no restriction. */
export interface AllowLists {
  /** Model id patterns, e.g. "gpt-4*". */
  allowedModels?: string[] | null;
  /** Tool name patterns; an upstream server's tools are `<server>__*`, a VM's `vm__<id>__*`. */
  allowedTools?: string[] | null;
}

/** At most this many patterns in one list: a longer list is a mistake, and each is tried per model or tool. */
export const MAX_PATTERNS = 100;

const PATTERN = /^[A-Za-z0-9._:/@*?+-]{1,128}$/;

/** One list of patterns as the key and tenant routes take it (400 on a bad pattern); null removes the list. */
export const AllowPatterns = (field: string) =>
  v.nullable(
    v.pipe(
      v.array(
        v.pipe(
          v.string(`${field} must hold strings`),
          v.trim(),
          v.regex(PATTERN, `${field}: each pattern is 1-128 of letters, digits, . _ : / @ + - and the wildcards * ?`),
        ),
        `${field} must be an array of patterns or null`,
      ),
      v.maxLength(MAX_PATTERNS, `${field} holds at most ${MAX_PATTERNS} patterns`),
      v.transform((patterns) => [...new Set(patterns)]),
    ),
  );

/** The fields the key and tenant create/update routes take. */
export const AllowListFields = {
  allowedModels: v.optional(AllowPatterns("allowedModels")),
  allowedTools: v.optional(AllowPatterns("allowedTools")),
};

const compiled = new Map<string, RegExp>();

/** A glob as an anchored expression: only `*` and `?` are special (patterns hold no other metacharacter but `.` and `+`). */
function globOf(pattern: string): RegExp {
  let found = compiled.get(pattern);
  if (!found) {
    const source = pattern.replace(/[.+]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
    found = new RegExp(`^${source}$`);
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(pattern, found);
  }
  return found;
}

/** True when `name` matches one of `patterns`. */
export function matchesAny(patterns: readonly string[], name: string): boolean {
  return patterns.some((pattern) => globOf(pattern).test(name));
}

/** Every list that applies to a caller: a name passes when each list has a pattern that matches it. */
export type PatternLists = readonly (readonly string[])[];

export function allowedBy(lists: PatternLists | undefined, name: string): boolean {
  return !lists || lists.every((patterns) => matchesAny(patterns, name));
}

/** What one caller may use: models and tools, each as the lists that apply (empty: anything). */
export interface CallerAllowance {
  models: PatternLists;
  tools: PatternLists;
}

export const UNRESTRICTED: CallerAllowance = { models: [], tools: [] };

type AllowDeps = Pick<Repos, "users" | "tenants">;

/**
 * The tenant whose default lists apply to a caller: the one an OAuth token was consented for,
 * a platform key's workspace's, else the user's own.
 */
export async function tenantIdOf(deps: AllowDeps, principal: Principal): Promise<string | undefined> {
  if (principal.tenantId !== undefined) return principal.tenantId;
  if (principal.kind === "platform_key" && principal.workspaceId) {
    return (await deps.tenants.recentWorkspace(principal.workspaceId))?.tenantId;
  }
  // The short cache: this runs on every chat request and tool listing.
  return (await deps.users.recent(principal.userId))?.tenantId;
}

const known = new WeakMap<Principal, Promise<CallerAllowance>>();

/**
 * The lists of a caller: its key's (if it came with a key) and its tenant's default. Read once
 * per request (the principal is made per request); internal services are unrestricted.
 */
export function allowanceOf(deps: AllowDeps, principal: Principal | undefined): Promise<CallerAllowance> {
  if (!principal || principal.kind === "service") return Promise.resolve(UNRESTRICTED);
  let found = known.get(principal);
  if (!found) {
    found = readAllowance(deps, principal);
    known.set(principal, found);
  }
  return found;
}

async function readAllowance(deps: AllowDeps, principal: Principal): Promise<CallerAllowance> {
  const tenantId = await tenantIdOf(deps, principal);
  const tenant = tenantId ? await deps.tenants.recentTenant(tenantId) : null;
  const sources: AllowLists[] = [principal.key ?? {}, tenant ?? {}];
  return {
    models: sources.flatMap((source) => (source.allowedModels ? [source.allowedModels] : [])),
    tools: sources.flatMap((source) => (source.allowedTools ? [source.allowedTools] : [])),
  };
}

/** Applies `params`' allow-list fields to a record: undefined leaves a list, null removes it. */
export function withAllowLists<T extends AllowLists>(record: T, params: AllowLists): T {
  const next = { ...record };
  if (params.allowedModels !== undefined) next.allowedModels = params.allowedModels;
  if (params.allowedTools !== undefined) next.allowedTools = params.allowedTools;
  return next;
}

/** A record's lists as views show them (null: unrestricted). */
export function allowListView(record: AllowLists): { allowedModels: string[] | null; allowedTools: string[] | null } {
  return { allowedModels: record.allowedModels ?? null, allowedTools: record.allowedTools ?? null };
}
