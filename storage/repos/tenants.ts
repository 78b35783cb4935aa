import { Collection } from "../collection.js";
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

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.tenants = new Collection<Tenant>(store.kv, "tenants");
    this.workspaces = new Collection<Workspace>(store.kv, "workspaces");
    this.#byTenant = new Collection<{ id: string }>(store.kv, "tenant-workspaces");
  }

  getTenant(id: string) {
    return Collection.validId(id) ? this.tenants.get(id) : Promise.resolve(null);
  }

  putTenant(tenant: Tenant) {
    return this.tenants.put([tenant.id], tenant);
  }

  /** Takes a slug for a tenant id; false when another tenant holds it. */
  claimSlug(slug: string, tenantId: string): Promise<boolean> {
    return this.#atomic.setIfAbsent(`tenant-slug:${slug}`, tenantId);
  }

  /** Gives a slug back, only if this tenant still holds it. */
  async releaseSlug(slug: string, tenantId: string): Promise<void> {
    await this.#atomic.compareAndSet(`tenant-slug:${slug}`, tenantId, null);
  }

  removeTenant(id: string) {
    return this.tenants.remove(id);
  }

  removeWorkspace(id: string) {
    return this.workspaces.remove(id);
  }

  getWorkspace(id: string) {
    return Collection.validId(id) ? this.workspaces.get(id) : Promise.resolve(null);
  }

  /** Writes the index entry first: a crash leaves at most an entry without a workspace, which the list skips. */
  async putWorkspace(workspace: Workspace) {
    await this.#byTenant.put([workspace.tenantId, workspace.id], { id: workspace.id });
    return this.workspaces.put([workspace.id], workspace);
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
