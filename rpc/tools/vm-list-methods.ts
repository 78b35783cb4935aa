import * as v from "valibot";
import { tenantsOf } from "../tenants/access.js";
import { toolsDomain } from "./deps.js";

const VmView = v.object({
  vmId: v.string(),
  agentId: v.string(),
  tenantId: v.string(),
  connectedAt: v.string(),
  tools: v.pipe(v.number(), v.description("Tools the VM offers")),
});

/** Connected VM agents a user may see (docs/vm-agents.md): those of the tenants they are a member of. */
export const vmListMethods = [
  toolsDomain.method({
    name: "vms.list",
    summary: "VM agents connected now (on any instance) for the tenants the caller is a member of, with their tool count.",
    input: v.object({}),
    auth: { kinds: ["session", "gateway_key", "console"] },
    output: v.object({ vms: v.array(VmView), count: v.number() }),
    http: [
      { surface: "gateway", method: "GET", path: "/vms" },
      { surface: "console", method: "GET", path: "/vms" },
    ],
    async handler(_params, ctx) {
      const tenants = new Set((await tenantsOf(ctx.deps, ctx.principal)).map(({ tenant }) => tenant.id));
      const vms = (await ctx.deps.vms.list())
        .filter((vm) => tenants.has(vm.tenantId))
        .sort((a, b) => a.vmId.localeCompare(b.vmId))
        .map((vm) => ({ vmId: vm.vmId, agentId: vm.agentId, tenantId: vm.tenantId, connectedAt: vm.connectedAt, tools: vm.tools.length }));
      return { vms, count: vms.length };
    },
  }),
];
