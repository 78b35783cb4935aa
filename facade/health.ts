import type { H3 } from "h3";
import type { Dispatcher } from "../rpc/dispatcher.js";
import { probeStorage } from "../rpc/tools/health-methods.js";
import { jsonResponse } from "./transport/instrument.js";

/** What the process says about itself: set by the composition root when it starts draining. */
export interface Lifecycle {
  draining: boolean;
}

const NO_STORE = () => new Headers({ "cache-control": "no-store" });

/**
 * `GET /healthz` (the process answers: no dependency is touched) and `GET /readyz` (storage
 * answers and the process is not draining; 503 with the reason otherwise), for load balancers
 * and orchestrators. Public, outside every surface: no credentials, no rate limit, and no log
 * line, so a probe every second neither fills the logs nor spends anyone's budget.
 */
export function healthTransport(lifecycle: Lifecycle) {
  return (app: H3, dispatcher: Dispatcher): void => {
    app.on("GET", "/healthz", () => jsonResponse({ status: "ok" }, 200, NO_STORE()));
    app.on("GET", "/readyz", async () => {
      if (lifecycle.draining)
        return jsonResponse({ status: "unavailable", reason: "draining: the process is shutting down" }, 503, NO_STORE());
      const { store } = dispatcher.ports;
      const storage = await probeStorage(store);
      if (!storage.ok)
        return jsonResponse({ status: "unavailable", reason: `storage (${store.driver}): ${storage.error}` }, 503, NO_STORE());
      return jsonResponse({ status: "ready", storage: store.driver }, 200, NO_STORE());
    });
  };
}
