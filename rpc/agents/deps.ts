import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { ToolCatalog } from "../tools/ports.js";
import type { ModelRouter } from "../chat/model-router.js";
import type { Money } from "../money/money.js";

/** What the agents domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type AgentsDeps = Pick<Repos, "users" | "tenants" | "members" | "agents" | "agentState" | "quotas"> &
  Pick<Ports, "config" | "log" | "store" | "sink" | "onClose"> & {
    catalog: ToolCatalog;
    models: ModelRouter;
    money: Money;
  };

export const agentsDomain = domain<AgentsDeps>("agents");

/** The call context of a agents handler or helper. */
export type AgentsContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, AgentsDeps>;
