import type { OpenToolBridge } from "./ports.js";

/** A bridge with no tools, for callers that never touch the catalog (the admin command). */
export const noTools: OpenToolBridge = async () => ({
  catalog: {
    list: async () => [],
    get: async () => undefined,
    resolve: async () => undefined,
    run: async ({ tool }) => {
      throw new Error(`No tool bridge in this process: ${tool.name}`);
    },
    call: async (name) => {
      throw new Error(`No tool bridge in this process: ${name}`);
    },
    onChange: () => () => undefined,
  },
  vms: {
    admit: async () => {
      throw new Error("No tool bridge in this process");
    },
    list: async () => [],
    find: async () => undefined,
    call: async (vmId) => {
      throw new Error(`No tool bridge in this process: ${vmId}`);
    },
    ask: async (vmId) => {
      throw new Error(`No tool bridge in this process: ${vmId}`);
    },
    stats: () => ({ connected: 0, inFlight: 0 }),
  },
  upstream: {
    register: async () => {
      throw new Error("No tool bridge in this process");
    },
    remove: async () => undefined,
    list: async () => [],
    summary: () => ({ shared: [], tenants: { total: 0, healthy: 0, unhealthy: 0 } }),
    find: () => undefined,
    visible: () => [],
  },
  close: async () => undefined,
});
