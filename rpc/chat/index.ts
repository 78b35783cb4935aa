import { pick } from "../module.js";
import { chatDomain } from "./deps.js";
import { chatMethods } from "./methods.js";
import { dialectMethods } from "./dialect-methods.js";
import { modelMethods } from "./model-methods.js";
import { loadModels } from "./models-config.js";
import { ModelRouter } from "./model-router.js";
import { embeddingsMethods } from "./embeddings/methods.js";
import { Embeddings } from "./embeddings/router.js";

/**
 * Chat completions on every surface, the Responses and Messages dialects (docs/dialects.md),
 * embeddings (docs/embeddings.md) and the model catalog (docs/models-and-chat.md).
 */
export const chatModule = chatDomain.module({
  methods: [...modelMethods, ...chatMethods, ...dialectMethods, ...embeddingsMethods],
  check: (config) => void loadModels(config),
  init: async (ports) => {
    // The model router (docs/interface.md's "model gateway"): ids to deployments, prices.
    const models = new ModelRouter(loadModels(ports.config), ports.config, process.env);
    // Deployment cooldowns and capacity, shared by every instance (docs/providers.md "Cooldown").
    const stopSharing = await models.share(ports.repos.deployments, ports.store.bus, ports.metrics);
    return {
      ...pick(ports, ["config", "log", "metrics"]),
      users: ports.repos.users,
      quotas: ports.repos.quotas,
      tenants: ports.repos.tenants,
      models,
      embeddings: new Embeddings(models, ports.config, ports.metrics),
      money: ports.use("money"),
      stopSharing,
    };
  },
  close: (deps) => deps.stopSharing(),
  provides: (deps) => ({ models: deps.models }),
});

declare module "../ports.js" {
  interface DomainExports {
    /** The model router: ids to providers, prices, output caps (rpc/chat/model-router.ts). */
    models: ModelRouter;
  }
}
