import type { Principal } from "../auth.js";
import type { CallContext } from "../define.js";
import { domain, type Ports } from "../module.js";
import type { Repos } from "../repos.js";
import type { ModelRouter } from "./model-router.js";
import type { Embeddings } from "./embeddings/router.js";
import type { Money } from "../money/money.js";

/** What the chat domain's handlers reach as `ctx.deps` (built in `./index.ts`). */
export type ChatDeps = Pick<Repos, "users" | "quotas" | "tenants"> &
  Pick<Ports, "config" | "log" | "metrics"> & {
    models: ModelRouter;
    /** Embeddings through the model router (docs/embeddings.md). */
    embeddings: Embeddings;
    money: Money;
    /** Stops following other instances' deployment cooldowns (at close). */
    stopSharing: () => Promise<void>;
  };

export const chatDomain = domain<ChatDeps>("chat");

/** The call context of a chat handler or helper. */
export type ChatContext<P extends Principal | undefined = Principal | undefined> = CallContext<P, ChatDeps>;
