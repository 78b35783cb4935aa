import { createHash } from "node:crypto";
import { gzipSync } from "node:zlib";
import Negotiator from "negotiator";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { H3 } from "h3";

/**
 * Headers of every /console response. The page runs only its own bundled script and styles
 * (no inline script or style: uPlot and Preact set styles through the CSSOM, which CSP does
 * not govern), talks only to this origin, cannot be framed, and sends no Referer.
 */
export const CONSOLE_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src " +
    "'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "cross-origin-opener-policy": "same-origin",
  "cross-origin-resource-policy": "same-origin",
  "permissions-policy": "camera=(), microphone=(), geolocation=(), clipboard-write=(self)",
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Gateway console</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/console/assets/app.css">
  <script type="module" src="/console/assets/app.js"></script>
</head>
<body>
  <div id="app"></div>
  <noscript>The console needs JavaScript. The same operations are documented at /docs.</noscript>
</body>
</html>
`;

/** The bundle's files: the entry script and stylesheet, and esbuild's content-hashed chunks. */
const ASSET_NAME = /^(app|chunk-[A-Za-z0-9]+)\.(js|css)$/;
const TYPES: Record<string, string> = { js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8" };

/** The repository root (holding package.json), from the source tree or from dist/. */
function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "package.json"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("package.json not found above facade/console");
    dir = parent;
  }
  return dir;
}

/** Where scripts/build-console.mjs writes the bundle. */
export const CONSOLE_ASSET_DIR = join(projectRoot(), "dist", "console");

function headers(type: string, extra: Record<string, string>): Headers {
  return new Headers({ ...CONSOLE_SECURITY_HEADERS, "content-type": type, ...extra });
}

/**
 * The console page at /console and its bundle at /console/assets/*. The page is a client of
 * the console endpoints under /api (docs/console.md); nothing here reads a session.
 */
export function mountConsole(app: H3, assetDir = CONSOLE_ASSET_DIR): void {
  const cache = new Map<string, { body: Uint8Array; gzip: Uint8Array; etag: string }>();
  const page = () => new Response(PAGE, { headers: headers("text/html; charset=utf-8", { "cache-control": "no-store" }) });
  app.on("GET", "/console", page);
  app.on("GET", "/console/", page);
  // The MCP authorization server's consent page is a screen of the console (docs/mcp.md "Sign-in and consent").
  app.on("GET", "/oauth/interaction/:uid", page);
  app.on("GET", "/console/assets/:file", async (event) => {
    const file = event.context.params?.file ?? "";
    const match = ASSET_NAME.exec(file);
    if (!match) return new Response("Not found", { status: 404, headers: headers("text/plain; charset=utf-8", {}) });
    let asset = cache.get(file);
    if (!asset) {
      let body: Buffer;
      try {
        body = await readFile(join(assetDir, file));
      } catch {
        if (match[1] !== "app") return new Response("Not found", { status: 404, headers: headers("text/plain; charset=utf-8", {}) });
        return new Response("The console is not built: run npm run build", {
          status: 503,
          headers: headers("text/plain; charset=utf-8", { "cache-control": "no-store" }),
        });
      }
      // Compressed once, when first asked for: the bundle is a few files that change only with a build.
      asset = {
        body: new Uint8Array(body),
        gzip: new Uint8Array(gzipSync(body, { level: 9 })),
        etag: `"${createHash("sha256").update(body).digest("base64url").slice(0, 22)}"`,
      };
      cache.set(file, asset);
    }
    // Revalidated on each load (a rebuilt bundle is picked up by the next start); 304 when unchanged.
    const type = TYPES[match[2]!]!;
    const extra = { "cache-control": "no-cache", etag: asset.etag, vary: "accept-encoding" };
    if (event.req.headers.get("if-none-match") === asset.etag) return new Response(null, { status: 304, headers: headers(type, extra) });
    const acceptEncoding = event.req.headers.get("accept-encoding") ?? undefined;
    if (new Negotiator({ headers: { "accept-encoding": acceptEncoding } }).encodings(["gzip"]).length > 0)
      return new Response(asset.gzip, { headers: headers(type, { ...extra, "content-encoding": "gzip" }) });
    return new Response(asset.body, { headers: headers(type, extra) });
  });
}
