import { modelRegistryDomain } from "./deps.js";
import { modelRegistryMethods } from "./methods.js";
import { ModelRegistry } from "./registry.js";

/** Catalog metadata, statuses the router obeys, and health per model (docs/model-registry.md). */
export const modelRegistryModule = modelRegistryDomain.module({
  methods: modelRegistryMethods,
  init: async ({ config, store, repos, use }) => {
    const modelRegistry = new ModelRegistry(repos.modelRegistry, use("models"), store.bus, config);
    await modelRegistry.start();
    return { config, modelRegistry, audit: repos.audit, users: repos.users, tenants: repos.tenants };
  },
  close: (deps) => deps.modelRegistry.stop(),
});
