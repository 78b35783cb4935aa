import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { H3 } from "h3";

const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Gateway API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: "StandaloneLayout" });
  </script>
</body>
</html>`;

/**
 * `/openapi.json` and an interactive reference at `/docs`, rendered by Swagger UI served locally.
 * `document` gets the origin clients reach the service at (PUBLIC_URL, else the request's), for
 * the document's `servers` entry.
 */
export function mountDocs(app: H3, document: (origin: string) => unknown, publicUrl?: string) {
  const dir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const cache = new Map<string, Buffer>();
  app.on(
    "GET",
    "/openapi.json",
    (event) =>
      new Response(JSON.stringify(document((publicUrl ?? new URL(event.req.url).origin).replace(/\/$/, ""))), {
        headers: { "content-type": "application/json; charset=utf-8" },
      }),
  );
  app.on("GET", "/docs", () => new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } }));
  app.on("GET", "/docs/assets/:file", async (event) => {
    const file = event.context.params?.file ?? "";
    const type = ASSETS[file];
    if (!type) return new Response("Not found", { status: 404 });
    let body = cache.get(file);
    if (!body) {
      body = await readFile(join(dir, file));
      cache.set(file, body);
    }
    return new Response(new Uint8Array(body), { headers: { "content-type": type, "cache-control": "public, max-age=3600" } });
  });
}
