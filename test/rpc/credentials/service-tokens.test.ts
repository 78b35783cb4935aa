import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SignJWT, UnsecuredJWT } from "jose";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { bearer, registerUser, startTestServer, TEST_JWT_SECRET, type TestServer } from "../../helpers/server.js";
import { connectVm, vmSocketUrl, type TestVm } from "../../helpers/vm.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * docs/interface.md 5: the bridge accepts HS256 service tokens signed with SERVICE_JWT_SECRET on every
 * method whose auth lists the `service` kind (docs/service-tokens.md): aud "bridge", iss one
 * of the deployment's services, exp required and at most an hour ahead.
 */

const SECRET = "service-jwt-secret-for-tests-0123456789abcdef";

async function serviceToken(
  options: { secret?: string; iss?: string; aud?: string; expiresIn?: number | null; sub?: string; alg?: "HS256" | "HS512" } = {},
) {
  const now = Math.floor(Date.now() / 1000);
  let jwt = new SignJWT({})
    .setProtectedHeader({ alg: options.alg ?? "HS256", typ: "JWT" })
    .setIssuedAt(now)
    .setSubject(options.sub ?? "orchestrator");
  if (options.iss !== "") jwt = jwt.setIssuer(options.iss ?? "orchestrator");
  if (options.aud !== "") jwt = jwt.setAudience(options.aud ?? "bridge");
  if (options.expiresIn !== null) jwt = jwt.setExpirationTime(now + (options.expiresIn ?? 60));
  return jwt.sign(new TextEncoder().encode(options.secret ?? SECRET));
}

const execute = (server: TestServer, token: string) =>
  server.request("/bridge/tools/execute", {
    method: "POST",
    headers: bearer(token),
    json: { tool_name: "hello", input: { who: "service" }, vm_id: "svc-vm", timeout: 5 },
  });

describe("service tokens on the bridge", () => {
  let server: TestServer;
  let vm: TestVm;
  let userToken: string;

  beforeAll(async () => {
    server = await startTestServer({ SERVICE_JWT_SECRET: SECRET, GATEWAY_RATE_LIMIT_RPM: "10000" });
    userToken = (await registerUser(server)).token;
    vm = await connectVm(vmSocketUrl(server.origin, "agent-1", { vmId: "svc-vm" }), userToken, {
      "tools/call": (params: { arguments: { who: string } }) => `hello ${params.arguments.who}`,
    });
    await vm.register([{ name: "hello" }]);
  });
  afterAll(async () => {
    await vm.close();
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  it("POST /bridge/tools/execute accepts a valid service token and reaches any tenant's VM", async () => {
    const res = await execute(server, await serviceToken());
    expect(res.status).toBe(200);
    expect(res.body.content).toEqual([{ type: "text", text: "hello service" }]);
  });

  it("the MCP endpoint accepts it and lists every tenant's VM tools", async () => {
    const client = new Client({ name: "svc", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), {
        requestInit: { headers: bearer(await serviceToken({ iss: "manager" })) },
      }),
    );
    try {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toContain("vm__svc-vm__hello");
    } finally {
      await client.close();
    }
  });

  it("the VM socket accepts it", async () => {
    const serviceVm = await connectVm(
      vmSocketUrl(server.origin, "agent-2", { vmId: "svc-owned-vm", tenantId: "ops" }),
      await serviceToken({ iss: "gateway" }),
    );
    try {
      await serviceVm.register([{ name: "ping2" }]);
      await eventually(async () => (await server.bridge.vms.find("svc-owned-vm"))?.tenantId === "ops");
    } finally {
      await serviceVm.close();
    }
  });

  it.each([
    ["a wrong secret", () => serviceToken({ secret: "another-secret-entirely-0123456789abcdef" })],
    ["the session secret", () => serviceToken({ secret: TEST_JWT_SECRET })],
    ["an expired token", () => serviceToken({ expiresIn: -120 })],
    ["no expiry", () => serviceToken({ expiresIn: null })],
    ["a lifetime over an hour", () => serviceToken({ expiresIn: 2 * 3600 })],
    ["an unknown issuer", () => serviceToken({ iss: "someone-else" })],
    ["no issuer", () => serviceToken({ iss: "" })],
    ["an audience other than the bridge", () => serviceToken({ aud: "orchestrator" })],
    ["another algorithm", () => serviceToken({ alg: "HS512" })],
    [
      "an unsigned token",
      async () => new UnsecuredJWT({}).setIssuer("orchestrator").setAudience("bridge").setExpirationTime("1m").encode(),
    ],
  ])("refuses %s with 401", async (_label, make) => {
    const res = await execute(server, await make());
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("UNAUTHORIZED");
  });

  it("is refused where the service kind is not listed (Gateway routes)", async () => {
    const res = await server.request("/gateway/v1/mcp/tools", { headers: bearer(await serviceToken()) });
    expect(res.status).toBe(401);
  });

  it("is refused when SERVICE_JWT_SECRET is not configured", async () => {
    const plain = await startTestServer();
    try {
      const res = await execute(plain, await serviceToken());
      expect(res.status).toBe(401);
    } finally {
      await plain.close();
    }
  });

  it("a user's session token still works next to service tokens", async () => {
    const res = await execute(server, userToken);
    expect(res.status).toBe(200);
  });
});
