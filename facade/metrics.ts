import { timingSafeEqual, createHash } from "node:crypto";
import type { H3 } from "h3";
import type { Dispatcher } from "../rpc/dispatcher.js";
import { jsonResponse } from "./transport/instrument.js";
import { clustered, clusterScrape } from "./cluster-metrics.js";

const digest = (value: string) => createHash("sha256").update(value).digest();

/**
 * `GET /metrics`: the Prometheus exposition of `services.metrics` and the process metrics.
 * With METRICS_TOKEN set, only `Authorization: Bearer <METRICS_TOKEN>` may scrape (401
 * otherwise). Outside every surface: not rate-limited, not logged.
 */
export function metricsTransport(app: H3, dispatcher: Dispatcher): void {
  const { metrics, config } = dispatcher.ports;
  const expected = config.METRICS_TOKEN ? digest(config.METRICS_TOKEN) : undefined;
  // Under WORKERS the scrape is every worker's, summed (facade/cluster-metrics.ts).
  const wholeHost = clustered(() => metrics.registries());
  app.on("GET", "/metrics", async (event) => {
    if (expected) {
      const match = /^Bearer\s+(\S+)\s*$/i.exec(event.req.headers.get("authorization") ?? "");
      // Compared as digests: equal lengths, constant time.
      if (!match || !timingSafeEqual(digest(match[1]!), expected)) {
        return jsonResponse(
          { error: { code: "UNAUTHORIZED", message: "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>" } },
          401,
          new Headers({ "www-authenticate": 'Bearer realm="metrics"' }),
        );
      }
    }
    const { contentType, body } = wholeHost ? await clusterScrape() : await metrics.scrape();
    return new Response(body, { headers: { "content-type": contentType, "cache-control": "no-store" } });
  });
}
