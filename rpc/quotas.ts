import { randomUUID } from "node:crypto";
import type { Principal } from "./auth.js";
import type { Config } from "./config.js";
import { ServiceError } from "./errors.js";
import type { Logger } from "./log.js";
import { layered } from "./layers.js";
import { principalRateKey } from "./policies/rate-limit.js";
import type { QuotasRepo } from "../storage/repos/quotas.js";

/**
 * The quotas (docs/quotas.md): how much one user, tenant or key may hold at once, each set by
 * one variable, each enforced across instances through storage (storage/repos/quotas.ts), each
 * refused in the surface's envelope with `details: {quota, limit, count}`: the caller is told the
 * limit, the operator's log line names the variable that sets it (`operatorNote.variable`).
 */
export const QUOTAS = {
  keys_per_user: { variable: "QUOTA_KEYS_PER_USER", holds: (n: number) => `this user has ${n} live API key(s)`, next: "revoke one first" },
  vm_sockets_per_tenant: {
    variable: "QUOTA_VM_SOCKETS_PER_TENANT",
    holds: (n: number) => `this tenant has ${n} VM socket(s) open`,
    next: "close one first",
  },
  vm_tools_per_tenant: {
    variable: "QUOTA_VM_TOOLS_PER_TENANT",
    holds: (n: number) => `this tenant's VMs announce ${n} tool(s)`,
    next: "announce fewer",
  },
  mcp_servers_per_tenant: {
    variable: "QUOTA_MCP_SERVERS_PER_TENANT",
    holds: (n: number) => `this tenant has ${n} MCP server(s)`,
    next: "delete one first",
  },
  webhook_subscriptions_per_tenant: {
    variable: "QUOTA_WEBHOOK_SUBSCRIPTIONS_PER_TENANT",
    holds: (n: number) => `this tenant has ${n} webhook subscription(s)`,
    next: "delete one first",
  },
  streams_per_key: {
    variable: "QUOTA_STREAMS_PER_KEY",
    holds: (n: number) => `this credential has ${n} stream(s) in flight`,
    next: "retry once one ends",
  },
  streams_per_user: {
    variable: "QUOTA_STREAMS_PER_USER",
    holds: (n: number) => `this user has ${n} stream(s) in flight, all of their keys together`,
    next: "retry once one ends",
  },
  streams_per_tenant: {
    variable: "QUOTA_STREAMS_PER_TENANT",
    holds: (n: number) => `this tenant has ${n} stream(s) in flight, all of its users together`,
    next: "retry once one ends",
  },
  agent_sockets_per_user: {
    variable: "QUOTA_AGENT_SOCKETS_PER_USER",
    holds: (n: number) => `this user has ${n} agent stream socket(s) open`,
    next: "close one first",
  },
  agent_sockets_per_tenant: {
    variable: "QUOTA_AGENT_SOCKETS_PER_TENANT",
    holds: (n: number) => `this tenant has ${n} agent stream socket(s) open`,
    next: "close one first",
  },
  gateway_tenant_rpm: {
    variable: "GATEWAY_TENANT_RATE_LIMIT_RPM",
    holds: (n: number) => `this tenant made ${n} Gateway API request(s) this minute`,
    next: "retry later",
  },
} as const satisfies Record<string, { variable: keyof Config; holds: (count: number) => string; next: string }>;

export type QuotaName = keyof typeof QUOTAS;

/** The quota's limit, as configured. */
export function quotaLimit(config: Config, quota: QuotaName): number {
  return config[QUOTAS[quota].variable];
}

/**
 * The refusal of a quota: 409 CONFLICT (what is held must be given back first), or `code`
 * (429 for a stream, a rate) with its headers. `count` is what is held now; `extra` adds
 * details (the tenant, what was asked for).
 */
export function quotaReached(
  quota: QuotaName,
  limit: number,
  count: number,
  options: { extra?: Record<string, unknown>; code?: "CONFLICT" | "RATE_LIMITED"; headers?: Record<string, string> } = {},
): ServiceError {
  const { variable, holds, next } = QUOTAS[quota];
  return new ServiceError(options.code ?? "CONFLICT", `Quota reached: ${holds(count)}, the most allowed (limit ${limit}); ${next}`, {
    details: { quota, limit, count, ...options.extra },
    operatorNote: { quota, variable },
    ...(options.headers ? { headers: options.headers } : {}),
  });
}

/**
 * Creates one more of what `quota` counts for `scope` unless that would pass the limit: the
 * count is read and the record written under the quota's lock for that scope, shared by every
 * instance on one Redis, so N concurrent creates at the edge never pass the quota. The count
 * is of the records themselves, so a process killed mid-way leaves nothing to correct.
 */
export async function createWithinQuota<T>(
  deps: { config: Config; quotas: QuotasRepo },
  quota: QuotaName,
  scope: string,
  count: () => Promise<number>,
  create: () => Promise<T>,
  extra?: Record<string, unknown>,
): Promise<T> {
  const limit = quotaLimit(deps.config, quota);
  return deps.quotas.withLock(quota, scope, async () => {
    const current = await count();
    if (current >= limit) throw quotaReached(quota, limit, current, extra ? { extra } : {});
    return create();
  });
}

/** A stream's places (its credential's, its user's, its tenant's), given back once when it ends. */
export interface StreamPlace {
  release(): Promise<void>;
}

/** One quota a place is taken in, and whose: a credential, a user, a tenant. */
export interface PlaceScope {
  quota: QuotaName;
  /** The set of places (`quota-places:<set>:<scope>`). */
  set: string;
  scope: string;
}

/**
 * Takes one place in each of `scopes` in one atomic step (one round trip on Redis), or none:
 * past any limit, the first set in `scopes`' order that refused is thrown (429 with
 * Retry-After, or 409), and nothing was taken. Each place has a lease of `leaseMs`, renewed every half
 * lease while it is held, so the places of an instance that died are free again once their
 * lease ends. `signal` releases them too.
 */
export async function takePlaces(
  deps: { config: Config; quotas: QuotasRepo; log: Logger },
  scopes: readonly PlaceScope[],
  leaseMs: number,
  refusal: { code: "CONFLICT" | "RATE_LIMITED"; headers?: Record<string, string> },
  signal?: AbortSignal,
): Promise<StreamPlace> {
  if (scopes.length === 0) return { release: async () => undefined };
  const id = randomUUID();
  const place = { holder: id, token: id, weight: 1 };
  const limits = scopes.map(({ quota }) => quotaLimit(deps.config, quota));
  const claim = await deps.quotas.claimAll(
    scopes.map(({ set, scope }, i) => ({ quota: set, scope, limit: limits[i]! })),
    place,
    leaseMs,
  );
  if (!claim.taken) throw quotaReached(scopes[claim.refusedAt]!.quota, limits[claim.refusedAt]!, claim.others, refusal);
  const giveBack = (which: readonly PlaceScope[]) =>
    Promise.all(
      which.map(({ quota, set, scope }) =>
        deps.quotas
          .release(set, scope, id, id)
          // A place that could not be given back (storage down, or closed at shutdown) ends with its lease.
          .catch((error: unknown) => deps.log.info({ event: "quota.release_failed", quota, error: String(error) })),
      ),
    );
  const timer = setInterval(() => {
    for (const { quota, set, scope } of scopes)
      deps.quotas
        .renew(set, scope, [place], leaseMs)
        .catch((error: unknown) => deps.log.error({ event: "quota.renew_failed", quota, error: String(error) }));
  }, leaseMs / 2);
  timer.unref?.();
  let released: Promise<void> | undefined;
  const release = () => {
    released ??= (async () => {
      clearInterval(timer);
      signal?.removeEventListener("abort", onAbort);
      await giveBack(scopes);
    })();
    return released;
  };
  const onAbort = () => void release();
  signal?.addEventListener("abort", onAbort, { once: true });
  if (signal?.aborted) await release();
  return { release };
}

/** What finds a caller's tenant: the user records (their own tenant). */
interface UsersOfTenants {
  recent(id: string): Promise<{ tenantId: string } | null>;
}

/**
 * The user and tenant a caller's streams and sockets count against: the user behind any
 * credential, and the tenant its credential is bound to (an OAuth token's) else the user's
 * own. The service credential counts against neither.
 */
export async function holderScopes(users: UsersOfTenants, principal: Principal): Promise<{ userId?: string; tenantId?: string }> {
  if (principal.kind === "service") return {};
  const tenantId = principal.tenantId ?? (await users.recent(principal.userId))?.tenantId;
  return { userId: principal.userId, ...(tenantId ? { tenantId } : {}) };
}

/**
 * Takes a place among the streams in flight of the credential (QUOTA_STREAMS_PER_KEY), its
 * user (QUOTA_STREAMS_PER_USER, all of their keys and sessions together) and its tenant
 * (QUOTA_STREAMS_PER_TENANT), or refuses with 429 before the stream starts. The places have a
 * lease of QUOTA_STREAM_LEASE_SECONDS (takePlaces). `signal` (the call's) releases them too.
 */
export async function takeStreamPlace(
  deps: { config: Config; quotas: QuotasRepo; log: Logger; users: UsersOfTenants },
  principal: Principal,
  signal?: AbortSignal,
): Promise<StreamPlace> {
  const { userId, tenantId } = await holderScopes(deps.users, principal);
  const scopes: PlaceScope[] = [{ quota: "streams_per_key", set: "streams", scope: principalRateKey(principal) }];
  if (userId) scopes.push({ quota: "streams_per_user", set: "streams_per_user", scope: userId });
  if (tenantId) scopes.push({ quota: "streams_per_tenant", set: "streams_per_tenant", scope: tenantId });
  return takePlaces(
    deps,
    scopes,
    deps.config.QUOTA_STREAM_LEASE_SECONDS * 1000,
    { code: "RATE_LIMITED", headers: { "retry-after": "1" } },
    signal,
  );
}

/**
 * The same items, with `end` run once when they end: finished, failed, or given up by the
 * client (`return()`, also before the first item). Awaited, so a place is free again before
 * the stream's last frame goes out.
 */
export function endingWith<T>(items: AsyncIterable<T>, end: () => Promise<void>): AsyncIterable<T> {
  let ended: Promise<void> | undefined;
  const finish = () => (ended ??= end());
  return {
    [Symbol.asyncIterator]() {
      // A layer over the items (rpc/layers.ts): no promise of its own per item.
      return layered<T, T>(items[Symbol.asyncIterator](), {
        step: (step) => (step.done ? finish().then(() => step) : step),
        error: (error) =>
          finish().then(() => {
            throw error;
          }),
        async stop(below) {
          try {
            await below();
          } finally {
            await finish();
          }
        },
      });
    },
  };
}
