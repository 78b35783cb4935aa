import type { Store } from "../store.js";

/**
 * Which tenant owns each vmId (docs/architecture.md "Ownership": a VM is bound to the tenant that first
 * connected its vmId). One claim per vmId in `store.atomic`, set only when absent, so two
 * tenants racing for a new vmId get one winner — across instances with Redis. The claim is
 * kept when the VM disconnects: the vmId stays the tenant's for its next connection.
 */
export class VmOwnersRepo {
  readonly #store: Store;

  constructor(store: Store) {
    this.#store = store;
  }

  #key(vmId: string): string {
    return `vm-owner:${vmId}`;
  }

  /** The vmId's owner after this claim: `tenantId` when it was free or already this tenant's. */
  async claim(vmId: string, tenantId: string): Promise<string> {
    if (await this.#store.atomic.setIfAbsent(this.#key(vmId), tenantId)) return tenantId;
    return (await this.owner(vmId)) ?? tenantId;
  }

  owner(vmId: string): Promise<string | null> {
    return this.#store.atomic.get(this.#key(vmId));
  }
}
