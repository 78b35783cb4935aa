import { pick } from "../module.js";
import { chatDomain } from "./deps.js";
import { chatMethods } from "./methods.js";
import { modelMethods } from "./model-methods.js";
import { loadModels } from "./models-config.js";
import { ModelRouter } from "./model-router.js";

/** Chat completions on every surface and the model catalog (docs/models-and-chat.md). */
export const chatModule = chatDomain.module({
  methods: [...modelMethods, ...chatMethods],
  check: (config) => void loadModels(config),
  init: (ports) => ({
    ...pick(ports, ["config", "log", "metrics"]),
    users: ports.repos.users,
    // The model router (the spec's "model gateway"): ids to providers, prices.
    models: new ModelRouter(loadModels(ports.config), ports.config, process.env),
    money: ports.use("money"),
  }),
  provides: (deps) => ({ models: deps.models }),
});

declare module "../ports.js" {
  interface DomainExports {
    /** The model router: ids to providers, prices, output caps (rpc/chat/model-router.ts). */
    models: ModelRouter;
  }
}
