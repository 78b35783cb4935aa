import { toolSpan } from "./tool-span.js";
import * as v from "valibot";
import { principalOf } from "../auth.js";
import { ServiceError } from "../errors.js";
import type { Principal } from "../auth.js";
import { reaches, tenantOrPersonal } from "../tenants/access.js";
import { queryInt } from "../validate.js";
import { catalogName, vmNotConnected } from "./sources.js";
import type { VmIdentity } from "./ports.js";
import { ToolResultView } from "../views.js";
import { emitEvent } from "../event-sink.js";
import { allowanceOf, allowedBy } from "../allow-list.js";
import { toolsDomain, type ToolsDeps } from "./deps.js";

/** Ids are path-safe and MCP-name-safe (MCP allows `[A-Za-z0-9_.-]`). */
const VmSafeId = (field: string) =>
  v.pipe(
    v.string(`${field} is required`),
    v.regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, `${field}: letters, digits, _ . - (1-64, starting with a letter or digit)`),
  );

/**
 * The tenant a VM serves: the caller's own unless it names a tenant where the caller is a
 * member (role member or above); otherwise 403, as a socket upgrade has no 404 to hide behind.
 */
async function tenantOf(principal: Principal, requested: string | undefined, deps: ToolsDeps): Promise<string> {
  if (principal.kind === "service") return requested || "internal";
  try {
    return (await tenantOrPersonal(deps, principal, requested, "member")).id;
  } catch (error) {
    if (error instanceof ServiceError && (error.code === "NOT_FOUND" || error.code === "FORBIDDEN")) {
      throw new ServiceError("FORBIDDEN", `You cannot connect a VM for tenant ${requested}`);
    }
    throw error;
  }
}

export const bridgeVmsConnect = toolsDomain.method({
  name: "bridge.vms.connect",
  summary:
    "Admits a VM agent's socket (`WS /bridge/agents/{agent_id}/ws?vmId=&tenantId=`, docs/interface.md 4.5): the caller's " +
    "credential, the bridge rate limit, valid ids, a tenant the caller owns.",
  input: v.object({ agentId: VmSafeId("agent_id"), vmId: VmSafeId("vmId"), tenantId: v.optional(v.string()) }),
  auth: { kinds: ["session", "gateway_key", "service"] },
  // docs/interface.md 8: upgrades count against the same per-credential budget as other bridge requests.
  policies: { rateLimit: "bridge" },
  internal: true,
  errors: { FORBIDDEN: {}, CONFLICT: {} },
  http: [],
  async handler(params, ctx): Promise<VmIdentity> {
    const tenantId = await tenantOf(ctx.principal, params.tenantId || undefined, ctx.deps);
    const identity: VmIdentity = { vmId: params.vmId, agentId: params.agentId, tenantId, userId: ctx.principal.userId };
    // The first tenant to connect a vmId owns it; another tenant's socket is refused (403);
    // past the tenant's QUOTA_VM_SOCKETS_PER_TENANT, 409 (docs/quotas.md).
    const admitted = await ctx.deps.vms.admit(identity);
    emitEvent(ctx.deps, tenantId, "vm.connected", { vmId: identity.vmId, agentId: identity.agentId });
    return admitted;
  },
});

export const bridgeToolsExecute = toolsDomain.method({
  name: "bridge.tools.execute",
  summary:
    "Run a tool on a connected VM agent (docs/interface.md 2.7 VM tool dispatch). 503 when the VM is not connected, 504 past " +
    "`timeout`, 502 with the VM's message when the VM fails.",
  input: v.object({
    tool_name: v.pipe(v.string("tool_name must be a string"), v.minLength(1, "tool_name is required"), v.maxLength(200)),
    input: v.optional(v.record(v.string(), v.unknown(), "input must be an object"), {}),
    vm_id: v.pipe(v.string("vm_id must be a string"), v.minLength(1, "vm_id is required"), v.maxLength(64)),
    /** Seconds; default and upper bound GATEWAY_TIMEOUT_SECONDS (docs/interface.md 8). */
    timeout: v.optional(queryInt(1, 3600)),
  }),
  // docs/interface.md 4.5: "used by internal services" — they may present PLATFORM_SERVICE_KEY.
  auth: { kinds: ["session", "gateway_key", "service"] },
  output: ToolResultView,
  errors: { NOT_FOUND: {}, UNAVAILABLE: {}, TIMEOUT: {}, BAD_GATEWAY: {} },
  policies: { rateLimit: "bridge" },
  http: [{ surface: "bridge", method: "POST", path: "/tools/execute" }],
  async handler(params, ctx) {
    const principal = principalOf(ctx);
    const { vms, config } = ctx.deps;
    const record = await vms.find(params.vm_id);
    // Another tenant's VM answers exactly like a missing one, so VM ids cannot be probed;
    // internal services (PLATFORM_SERVICE_KEY) reach every VM.
    if (!record || (principal.kind !== "service" && !(await reaches(ctx.deps, principal.userId, record.tenantId, "member"))))
      throw vmNotConnected(params.vm_id);
    // The VM's own name, or its catalog name `vm__<vmId>__<tool>`.
    const prefix = catalogName(record.vmId, "");
    const tool = params.tool_name.startsWith(prefix) ? params.tool_name.slice(prefix.length) : params.tool_name;
    // The caller's tool allow-lists hold here too (docs/access-control.md): a tool they do not
    // allow is answered like one the VM does not have, and the tools listed are those they allow.
    const allowed = (await allowanceOf(ctx.deps, principal)).tools;
    const mayUse = (name: string) => allowedBy(allowed, catalogName(record.vmId, name));
    if ((record.tools.length > 0 && !record.tools.some((candidate) => candidate.name === tool)) || !mayUse(tool)) {
      throw new ServiceError("NOT_FOUND", `VM ${record.vmId} has no tool named ${tool}`, {
        details: { vmId: record.vmId, tools: record.tools.map((candidate) => candidate.name).filter(mayUse) },
      });
    }
    const seconds = Math.min(params.timeout ?? config.GATEWAY_TIMEOUT_SECONDS, config.GATEWAY_TIMEOUT_SECONDS);
    const name = catalogName(record.vmId, tool);
    const call = () => vms.call(record.vmId, tool, params.input, { timeoutMs: seconds * 1000, signal: ctx.signal });
    try {
      const result = await toolSpan(name, record.tenantId, call);
      ctx.deps.metrics.toolCall(name, result.isError ? "tool_error" : "ok");
      return result;
    } catch (error) {
      ctx.deps.metrics.toolCall(name, "failed");
      throw error;
    }
  },
});

export const vmToolMethods = [bridgeVmsConnect, bridgeToolsExecute];
