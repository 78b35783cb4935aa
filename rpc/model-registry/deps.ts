import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { ModelRegistry } from "./registry.js";

/** What the model-registry domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type ModelRegistryDeps = Pick<Repos, "audit" | "users" | "tenants"> &
  Pick<Ports, "config"> & {
    modelRegistry: ModelRegistry;
  };

export const modelRegistryDomain = domain<ModelRegistryDeps>("model-registry");

/** The call context of a model-registry handler or helper. */
export type ModelRegistryContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, ModelRegistryDeps>;
