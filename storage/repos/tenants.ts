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

export interface Workspace {
  id: string;
  tenantId: string;
  name: string;
  status: string;
  createdAt: string;
  updatedAt: string;
}

export class TenantsRepo {
  readonly tenants: Collection<Tenant>;
  readonly workspaces: Collection<Workspace>;

  readonly #atomic: Store["atomic"];

  constructor(store: Store) {
    this.#atomic = store.atomic;
    this.tenants = new Collection<Tenant>(store.kv, "tenants");
    this.workspaces = new Collection<Workspace>(store.kv, "workspaces");
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

  putWorkspace(workspace: Workspace) {
    return this.workspaces.put([workspace.id], workspace);
  }
}
