import { ServiceError } from "../errors.js";
import type { Policy } from "./policy.js";

/**
 * docs/tenants.md "Workspaces": an archived workspace's platform keys are refused (403
 * `workspace_archived`) until an admin reactivates it, on every method that takes them.
 */
export const archivedWorkspace: Policy = {
  name: "archivedWorkspace",
  stage: "call",
  applies: (method) => method.auth !== "public" && method.auth.kinds.includes("platform_key"),
  async run(call, next) {
    const { principal } = call;
    if (principal?.kind === "platform_key" && principal.key) {
      const workspaceId = principal.key.owner;
      if ((await call.ports.tenants.recentWorkspace(workspaceId))?.status === "archived") {
        throw new ServiceError(
          "FORBIDDEN",
          `Workspace ${workspaceId} is archived: its API keys are refused and no credits are spent until an admin reactivates it`,
          {
            details: { reason: "workspace_archived", workspaceId },
          },
        );
      }
    }
    return next();
  },
};
