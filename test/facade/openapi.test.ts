import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fullPath } from "../../facade/rest.js";
import { buildOpenApi } from "../../facade/openapi.js";
import { defineMethod, type ErrorMap } from "../../rpc/define.js";
import { ERROR_TABLE, type ErrorCode } from "../../rpc/errors.js";
import { authErrors, policyErrors } from "../../rpc/method-errors.js";
import { createRegistry } from "../../rpc/registry.js";
import * as v from "valibot";
import { bearer, newUserBody, startTestServer, type TestServer } from "../helpers/server.js";

describe("OpenAPI and docs", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it("serves a valid OpenAPI 3.1 document generated from the registry", async () => {
    const res = await server.request("/openapi.json");
    expect(res.status).toBe(200);
    const document = res.body;
    expect(document.openapi).toBe("3.1.0");
    const result = await new Validator().validate(document);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);

    // Every REST binding of every method appears, with its JSON-RPC name.
    for (const method of Object.values(server.dispatcher.registry)) {
      for (const binding of method.http) {
        const path = fullPath(binding)
          .replace(/\*\*:(\w+)/g, ":$1")
          .replace(/:(\w+)/g, "{$1}");
        const op = document.paths[path]?.[binding.method.toLowerCase()];
        expect(op, `${binding.method} ${path}`).toBeDefined();
        expect(op["x-jsonrpc-method"]).toBe(method.name);
      }
    }
    const register = document.paths["/gateway/v1/auth/register"].post;
    expect(register.requestBody.content["application/json"].schema.required).toEqual(
      expect.arrayContaining(["email", "password", "fullName"]),
    );
    expect(document.paths["/gateway/v1/auth/keys/{key_id}"].delete.parameters[0]).toMatchObject({
      name: "key_id",
      in: "path",
      required: true,
    });
  });

  it("passes `redocly lint` with no error and every operation declaring its 4xx answers", async () => {
    const document = (await server.request("/openapi.json")).body;
    expect(document.servers).toEqual([expect.objectContaining({ url: server.origin })]);
    expect(document.paths["/rpc"].post.responses).toHaveProperty("400");
    const dir = await mkdtemp(join(tmpdir(), "openapi-lint-"));
    try {
      const file = join(dir, "openapi.json");
      await writeFile(file, JSON.stringify(document));
      const stdout = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          [join("node_modules", "@redocly", "cli", "bin", "cli.js"), "lint", file, "--format=json"],
          { env: { ...process.env, REDOCLY_TELEMETRY: "off", REDOCLY_SUPPRESS_UPDATE_NOTICE: "true" }, maxBuffer: 16 * 1024 * 1024 },
          // redocly exits 1 when it finds errors: the report on stdout says which.
          (error, out) => (out ? resolve(out) : reject(error)),
        ),
      );
      const report = JSON.parse(stdout) as {
        totals: { errors: number };
        problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
      };
      const shown = (ruleIds: (id: string) => boolean) =>
        report.problems.filter((p) => ruleIds(p.ruleId)).map((p) => `${p.ruleId} ${p.location[0]?.pointer}: ${p.message}`);
      expect(shown((id) => id === "operation-4xx-response")).toEqual([]);
      expect(report.totals.errors, shown(() => true).join("\n")).toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("takes security, error responses and result shapes from each method's declaration", async () => {
    const document = (await server.request("/openapi.json")).body;
    const keys = document.paths["/gateway/v1/auth/keys"];
    // Keys are made by a signed-in user only: no API-key scheme is offered for it.
    expect(keys.post.security).toEqual([{ sessionToken: [] }]);
    expect(keys.get.security).toEqual([{ sessionToken: [] }, { apiKeyBearer: [] }, { apiKeyHeader: [] }]);
    expect(document.paths["/api/v1/chat/completions"].post.security).toEqual([{ apiKeyBearer: [] }]);
    expect(document.paths["/bridge/health"].get.security).toEqual([]);
    expect(keys.post.responses["201"].content["application/json"].schema.required).toEqual(expect.arrayContaining(["id", "key", "prefix"]));
    expect(Object.keys(keys.post.responses)).toEqual(expect.arrayContaining(["201", "400", "401"]));
    expect(document.paths["/bridge/tools/execute"].post.responses["429"]).toBeDefined();
    // Internal gates are no operations.
    expect(JSON.stringify(document)).not.toContain("bridge.vms.connect");
  });

  it("takes each operation's error responses from its method's declared errors and those its auth, input and policies imply", async () => {
    const document = (await server.request("/openapi.json")).body;
    let operations = 0;
    for (const method of Object.values(server.dispatcher.registry)) {
      if (method.internal) continue;
      const declared = Object.keys(method.errors ?? {}) as ErrorCode[];
      for (const binding of method.http) {
        const implied = new Set<ErrorCode>([...authErrors(method.auth), ...policyErrors(method, binding.surface), "VALIDATION_FAILED"]);
        const path = fullPath(binding)
          .replace(/\*\*:(\w+)/g, ":$1")
          .replace(/:(\w+)/g, "{$1}");
        const responses = document.paths[path][binding.method.toLowerCase()].responses as Record<
          string,
          { description: string; "x-error-codes"?: ErrorCode[] }
        >;
        const where = `${method.name} ${binding.method} ${path}`;
        // Every declared code is a response with its status (the declared one, if any), named there.
        for (const code of declared) {
          const status = String(method.errors?.[code]?.status ?? ERROR_TABLE[code].status);
          expect(responses[status]?.["x-error-codes"], `${where}: ${code}`).toContain(code);
          expect(responses[status]!.description).toContain(`\`${code}\``);
        }
        for (const code of authErrors(method.auth))
          expect(responses[String(ERROR_TABLE[code].status)]?.["x-error-codes"], `${where}: ${code}`).toContain(code);
        // ... and every error response comes from the declaration: nothing else is listed.
        const listed = Object.entries(responses).filter(([status]) => /^[45]\d\d$/.test(status));
        for (const [status, response] of listed) {
          expect(response["x-error-codes"]?.length, `${where}: ${status} names its codes`).toBeGreaterThan(0);
          for (const code of response["x-error-codes"]!)
            expect(declared.includes(code) || implied.has(code), `${where}: ${code}`).toBe(true);
        }
        operations += 1;
      }
    }
    expect(operations).toBeGreaterThan(100);
    // Concretely: deleting an agent is 404 or 409 (declared), 401 (a session or key is required), 403 (roles).
    const remove = document.paths["/gateway/v1/agents/{agent_id}"].delete.responses;
    expect(remove["404"]["x-error-codes"]).toEqual(["NOT_FOUND"]);
    expect(remove["409"]["x-error-codes"]).toEqual(["CONFLICT"]);
    expect(remove["401"]["x-error-codes"]).toEqual(["UNAUTHORIZED"]);
    expect(remove["403"]["x-error-codes"]).toEqual(["FORBIDDEN"]);
    // The Platform's upstream timeout is declared with the 502 it is answered with (docs/interface.md 7.2).
    expect(document.paths["/api/v1/chat/completions"].post.responses["502"]["x-error-codes"]).toEqual(
      expect.arrayContaining(["BAD_GATEWAY", "UPSTREAM", "TIMEOUT"]),
    );
    expect(document.paths["/api/v1/chat/completions"].post.responses["504"]).toBeUndefined();
  });

  it("follows a change of the declaration: a declared error adds its response, worded as declared", () => {
    const declare = (errors: ErrorMap) =>
      defineMethod({
        name: "test.things.create",
        summary: "Creates a thing.",
        input: v.object({ name: v.string() }),
        output: v.object({ id: v.string() }),
        auth: { kinds: ["session"] },
        errors,
        http: [{ surface: "gateway", method: "POST", path: "/things" }],
        handler: () => ({ id: "t" }),
      });
    const responsesOf = (errors: ErrorMap) =>
      (buildOpenApi(createRegistry([declare(errors)])) as any).paths["/gateway/v1/things"].post.responses;
    const plain = responsesOf({});
    // Input (400), a session (401) and the Gateway's request budget (429) imply their own.
    expect(Object.keys(plain).filter((status) => /^\d+$/.test(status))).toEqual(["200", "400", "401", "429"]);
    expect(plain["429"]["x-error-codes"]).toEqual(["RATE_LIMITED"]);
    const conflicting = responsesOf({ CONFLICT: { message: "a thing with this name exists" } });
    expect(conflicting["409"]).toMatchObject({ "x-error-codes": ["CONFLICT"] });
    expect(conflicting["409"].description).toContain("`CONFLICT` (a thing with this name exists)");
  });

  it("answers with the shapes the declarations promise", async () => {
    const registry = server.dispatcher.registry;
    const check = (name: string, body: unknown) => {
      const result = v.safeParse(registry[name]!.output!, body);
      expect(result.issues?.map((issue) => `${v.getDotPath(issue)}: ${issue.message}`) ?? [], name).toEqual([]);
    };
    const registered = await server.request("/gateway/v1/auth/register", { method: "POST", json: newUserBody() });
    check("auth.register", registered.body);
    const auth = bearer(registered.body.token);
    check("auth.me", (await server.request("/gateway/v1/auth/me", { headers: auth })).body);
    const created = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: auth, json: { name: "shape" } });
    check("auth.keys.create", created.body);
    check("auth.keys.list", (await server.request("/gateway/v1/auth/keys", { headers: auth })).body);
    check("tenants.list", (await server.request("/gateway/v1/tenants", { headers: auth })).body);
    const models = (await server.request("/gateway/v1/models", { headers: auth })).body;
    check("gateway.models.list", models);
    const agent = await server.request("/gateway/v1/agents", {
      method: "POST",
      headers: auth,
      json: { name: "shaped", model: models.data[0].id, tools: [] },
    });
    check("agents.create", agent.body);
    check("agents.list", (await server.request("/gateway/v1/agents", { headers: auth })).body);
    check(
      "account.keys.create",
      (await server.request("/account/v1/keys", { method: "POST", headers: auth, json: { name: "personal" } })).body,
    );
    check("account.keys.list", (await server.request("/account/v1/keys", { headers: auth })).body);
    check("updates.releases.list", (await server.request("/gateway/v1/updates/releases", { headers: auth })).body);
    check(
      "updates.check",
      (await server.request("/gateway/v1/updates/check?component=desktop&currentVersion=1.0.0", { headers: auth })).body,
    );
    check("registry.models.list", (await server.request("/gateway/v1/model-registry/models", { headers: auth })).body);
    check("registry.models.get", (await server.request(`/gateway/v1/model-registry/models/${models.data[0].id}`, { headers: auth })).body);
    check(
      "telemetry.ingest",
      (
        await server.request("/gateway/v1/telemetry/events", {
          method: "POST",
          headers: auth,
          json: { events: [{ name: "app.start", timestamp: Date.now(), component: "desktop", version: "1.0.0", clientId: "c" }, {}] },
        })
      ).body,
    );
    check("mcp.tools.list", (await server.request("/gateway/v1/mcp/tools", { headers: auth })).body);
    check(
      "mcp.tools.execute",
      (
        await server.request("/gateway/v1/mcp/tools/execute?tool=calculator", {
          method: "POST",
          headers: auth,
          json: { args: { expression: "1+2" } },
        })
      ).body,
    );
    check("mcp.servers.list", (await server.request("/gateway/v1/mcp/servers", { headers: auth })).body);
    check("bridge.health", (await server.request("/bridge/health")).body);
    check(
      "gateway.chat.completions",
      (
        await server.request("/gateway/v1/chat/completions", {
          method: "POST",
          headers: auth,
          json: { model: models.data[0].id, messages: [{ role: "user", content: "shape" }] },
        })
      ).body,
    );
    check(
      "agents.invoke",
      (await server.request(`/gateway/v1/agents/${agent.body.id}/invoke`, { method: "POST", headers: auth, json: { input: "hi" } })).body,
    );
    check("agents.logs", (await server.request(`/gateway/v1/agents/${agent.body.id}/logs`, { headers: auth })).body);
    check("agents.deploy", (await server.request(`/gateway/v1/agents/${agent.body.id}/deploy`, { method: "POST", headers: auth })).body);
  });

  it("declares a result shape for every operation it documents", () => {
    const undeclared = Object.values(server.dispatcher.registry)
      .filter((method) => !method.internal && !method.output)
      .map((method) => method.name);
    expect(undeclared).toEqual([]);
  });

  it("renders an interactive docs page whose assets are served locally", async () => {
    const page = await fetch(server.url("/docs"));
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    expect(html).toContain("/openapi.json");
    for (const asset of [...html.matchAll(/(?:src|href)="(\/docs\/assets\/[^"]+)"/g)].map((m) => m[1]!)) {
      const res = await fetch(server.url(asset));
      expect(res.status, asset).toBe(200);
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(1000);
    }
    // An encoded slash outside a model id is refused before routing (docs/security.md "Strict paths").
    expect((await fetch(server.url("/docs/assets/..%2Fpackage.json"))).status).toBe(400);
  });
});
