import { Validator } from "@seriousme/openapi-schema-validator";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fullPath } from "../../facade/rest.js";
import { startTestServer, type TestServer } from "../helpers/server.js";

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
        const path = fullPath(binding).replace(/:(\w+)/g, "{$1}");
        const op = document.paths[path]?.[binding.method.toLowerCase()];
        expect(op, `${binding.method} ${path}`).toBeDefined();
        expect(op["x-jsonrpc-method"]).toBe(method.name);
      }
    }
    const register = document.paths["/gateway/v1/auth/register"].post;
    expect(register.requestBody.content["application/json"].schema.required).toEqual(expect.arrayContaining(["email", "password", "fullName"]));
    expect(document.paths["/gateway/v1/auth/keys/{key_id}"].delete.parameters[0]).toMatchObject({ name: "key_id", in: "path", required: true });
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
    expect((await fetch(server.url("/docs/assets/..%2Fpackage.json"))).status).toBe(404);
  });
});
