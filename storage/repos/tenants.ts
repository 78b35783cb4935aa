import { Collection } from "../collection.js";
import { BusCache } from "../bus-cache.js";
import { KEY_CACHE_MS } from "./keys.js";
import type { Store } from "../store.js";

export interface TenantLimits {
  agents: number;
  tokensPerMonth: number;
}

export interface Tenant {
  id: string;
  slug: string;
  name: string;
  plan: string;
  region: string;
  limits: TenantLimits;
  ownerId: string;
  createdAt: string;
  updatedAt: string;
  /** Model id patterns every caller of the tenant is held to; absent or null: any (docs/access-control.md). */
  allowedModels?: string[] | null;
  /** Tool name patterns every caller of the tenant is held to; absent or null: any. */
  allowedTools?: string[] | null;
}

/** docs/tenants.md "Workspaces": the statuses PATCH /workspaces/{id}?status= moves between. */
export const WORKSPACE_STATUSES = ["active", "archived"] as const;
export type WorkspaceStatus = (typeof WORKSPACE_STATUSES)[number];

export interface Workspace {
  id: string;
  tenantId: string;
  name: string;
  status: WorkspaceStatus;
  createdAt: string;
  updatedAt: string;
}

export class TenantsRepo {
  readonly tenants: Collection<Tenant>;
  readonly workspaces: Collection<Workspace>;
  /** `tenant-workspaces:<tenantId>:<workspaceId>`: a tenant's workspaces, listed without a scan. */
  readonly #byTenant: Collection<{ id: string }>;

  readonly #atomic: Store["atomic"];
  readonly #indexes: Store["indexes"];
  /** Workspaces as the request path reads them (a key's workspace status), dropped everywhere on change. */
  readonly #cached: BusCache<Workspace>;
  /** Tenants as the request path reads them (their allow-lists), dropped everywhere on change. */
  readonly #cachedTenants: BusCache<Tenant>;

  constructor(store: Store, options: { cacheMs?: number } = {}) {
    this.#atomic = store.atomic;
    this.#indexes = store.indexes;
    this.#cached = new BusCache<Workspace>(store.bus, "workspaces.changed", { ttlMs: options.cacheMs ?? KEY_CACHE_MS });
    this.#cachedTenants = new BusCache<Tenant>(store.bus, "tenants.changed", { ttlMs: options.cacheMs ?? KEY_CACHE_MS });
    this.tenants = new Collection<Tenant>(store, "tenants");
    this.workspaces = new Collection<Workspace>(store, "workspaces");
    this.#byTenant = new Collection<{ id: string }>(store, "tenant-workspaces");
  }

  getTenant(id: string) {
    return Collection.validId(id) ? this.tenants.get(id) : Promise.resolve(null);
  }

  async putTenant(tenant: Tenant) {
    const stored = await this.tenants.put([tenant.id], tenant);
    await this.#cachedTenants.invalidate(tenant.id);
    return stored;
  }

  /** The tenant from the short cache, for checks on every request (its allow-lists); changes reach it through `putTenant`. */
  recentTenant(id: string): Promise<Tenant | null> {
    return Collection.validId(id) ? this.#cachedTenants.get(id, () => this.tenants.get(id)) : Promise.resolve(null);
  }

  /** Takes a slug for a tenant id; false when another tenant holds it. */
  claimSlug(slug: string, tenantId: string): Promise<boolean> {
    return this.#atomic.setIfAbsent(`tenant-slug:${slug}`, tenantId);
  }

  /** Gives a slug back, only if this tenant still holds it. */
  async releaseSlug(slug: string, tenantId: string): Promise<void> {
    await this.#atomic.compareAndSet(`tenant-slug:${slug}`, tenantId, null);
  }

  async removeTenant(id: string) {
    await this.tenants.remove(id);
    await this.#cachedTenants.invalidate(id);
  }

  /** The workspace and its tenant's index entry, in one step. */
  async removeWorkspace(id: string) {
    const workspace = await this.getWorkspace(id);
    await this.#indexes.write([
      ...this.workspaces.removeChanges([id]),
      ...(workspace ? this.#byTenant.removeChanges([workspace.tenantId, id]) : []),
    ]);
    await this.#cached.invalidate(id);
  }

  getWorkspace(id: string) {
    return Collection.validId(id) ? this.workspaces.get(id) : Promise.resolve(null);
  }

  /**
   * The workspace from the short cache (storage/bus-cache.ts), for checks on every request
   * (an archived workspace's keys are refused); changes reach it through `putWorkspace`.
   */
  recentWorkspace(id: string): Promise<Workspace | null> {
    return Collection.validId(id) ? this.#cached.get(id, () => this.workspaces.get(id)) : Promise.resolve(null);
  }

  /** The workspace and its tenant's index entry, in one step. */
  async putWorkspace(workspace: Workspace) {
    await this.#indexes.write([
      ...this.#byTenant.putChanges([workspace.tenantId, workspace.id], { id: workspace.id }),
      ...this.workspaces.putChanges([workspace.id], workspace),
    ]);
    await this.#cached.invalidate(workspace.id);
    return workspace;
  }

  /** Every workspace, in id order, `limit` at a time after the id `after` (operators' overview; the index of every workspace). */
  async allWorkspaces(options: { after?: string; limit: number }): Promise<{ workspaces: Workspace[]; more: boolean }> {
    const ids = await this.workspaces.ids([], {
      ...(options.after !== undefined ? { after: options.after } : {}),
      limit: options.limit + 1,
    });
    const workspaces = await this.workspaces.getMany(ids.slice(0, options.limit).map((id) => this.workspaces.key(id)));
    return { workspaces, more: ids.length > options.limit };
  }

  /** The tenant's workspaces, oldest first (`extra`: ids known otherwise, e.g. a default workspace made before the index). */
  async workspacesOf(tenantId: string, extra: string[] = []): Promise<Workspace[]> {
    if (!Collection.validId(tenantId)) return [];
    const ids = new Set([...(await this.#byTenant.list(tenantId)).map((entry) => entry.id), ...extra]);
    const found = await Promise.all([...ids].map((id) => this.getWorkspace(id)));
    return found
      .filter((workspace): workspace is Workspace => workspace !== null && workspace.tenantId === tenantId)
      .sort((a, b) => a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id));
  }
}
