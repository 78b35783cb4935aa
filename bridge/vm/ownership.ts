import { ServiceError } from "../../rpc/errors.js";
import type { VmOwnersRepo } from "../../storage/repos/vm-owners.js";
import type { VmIdentity } from "../../rpc/tools/ports.js";

/**
 * The ownership rule of a VM socket, decided before the upgrade (docs/vm-agents.md
 * "Ownership"): the first tenant to connect a vmId owns it; the same tenant may connect it
 * again (the newer socket replaces the old one, on any instance); any other tenant is refused
 * with 403 and the owner's socket is left alone.
 */
export async function admitVmOwner(owners: VmOwnersRepo, identity: VmIdentity): Promise<void> {
  const owner = await owners.claim(identity.vmId, identity.tenantId);
  if (owner !== identity.tenantId) {
    throw new ServiceError("FORBIDDEN", `vmId ${identity.vmId} belongs to another tenant; connect this VM with a vmId of your own`, {
      details: { vmId: identity.vmId, reason: "vm_owned_by_another_tenant" },
    });
  }
}
