import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { http, HttpResponse, delay } from "msw";
import { jwtVerify } from "jose";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";

const MANAGER = "http://manager.billing.test/api";
const SECRET = "service-jwt-secret-of-at-least-32-characters!";
const G = "/gateway/v1";

interface Seen {
  method: string;
  url: URL;
  headers: Headers;
  body: Uint8Array;
}
let seen: Seen[] = [];
let respond: (request: Request) => Response | Promise<Response> = () => HttpResponse.json({ ok: true });

const msw = mockUpstreams(
  http.all(`${MANAGER}/*`, async ({ request }) => {
    seen.push({
      method: request.method,
      url: new URL(request.url),
      headers: request.headers,
      body: new Uint8Array(await request.clone().arrayBuffer()),
    });
    return respond(request);
  }),
);

let server: TestServer;
let unset: TestServer;
let alice: Awaited<ReturnType<typeof registerUser>>;

beforeAll(async () => {
  await msw.listen();
  server = await startTestServer({
    MANAGER_BASE_URL: msw.url(MANAGER),
    SERVICE_JWT_SECRET: SECRET,
    GATEWAY_TIMEOUT_SECONDS: "1",
    GATEWAY_MAX_RETRIES: "2",
  });
  unset = await startTestServer({ SERVICE_JWT_SECRET: SECRET });
  alice = await registerUser(server);
}, 30_000);
afterEach(() => {
  seen = [];
  respond = () => HttpResponse.json({ ok: true });
});
afterAll(async () => {
  await server?.close();
  await msw.close();
  await unset?.close();
});

describe("billing proxy", () => {
  it("forwards path, query and identity with a service token, never the caller's credential, and relays status, type and body", async () => {
    respond = () =>
      new HttpResponse("plan-data", {
        status: 201,
        headers: { "content-type": "application/vnd.plans+json", "set-cookie": "x=1", etag: '"v1"' },
      });
    const res = await fetch(server.url(`${G}/billing/plans/current?period=2026-11&x=a%20b`), {
      headers: {
        ...bearer(alice.token),
        "x-api-key": "sk_not_forwarded",
        cookie: "session=secret",
        "proxy-authorization": "Basic eDp5",
        te: "trailers",
        "x-custom": "kept",
        "x-gateway-user-id": "forged",
        accept: "application/json",
      },
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toBe("application/vnd.plans+json");
    expect(res.headers.get("etag")).toBe('"v1"');
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(await res.text()).toBe("plan-data");
    expect(seen).toHaveLength(1);
    const got = seen[0]!;
    expect(got.method).toBe("GET");
    expect(got.url.pathname).toBe("/api/plans/current");
    expect(got.url.search).toBe("?period=2026-11&x=a%20b");
    expect(got.headers.get("x-gateway-user-id")).toBe(alice.user.id);
    expect(got.headers.get("x-gateway-tenant-id")).toBe(alice.user.tenantId);
    expect(got.headers.get("x-gateway-workspace-id")).toBe(alice.user.workspaceId);
    expect(got.headers.get("x-custom")).toBe("kept");
    expect(got.headers.get("accept")).toBe("application/json");
    for (const name of ["x-api-key", "cookie", "proxy-authorization", "te"]) expect(got.headers.get(name), name).toBeNull();
    const authorization = got.headers.get("authorization")!;
    expect(authorization).not.toContain(alice.token);
    const { payload } = await jwtVerify(authorization.replace(/^Bearer /, ""), new TextEncoder().encode(SECRET), {
      audience: "manager",
      issuer: "gateway",
    });
    expect(payload.sub).toBe(alice.user.id);
    expect(payload.exp! - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(60);
  });

  it("strips identity a client could forge: X-User-Id, X-Tenant-Id, X-Forwarded-*, Forwarded, X-Real-IP and the gateway's own headers", async () => {
    const forged = {
      "x-user-id": "usr_forged",
      "x-tenant-id": "ten_forged",
      "x-workspace-id": "ws_forged",
      "x-forwarded-for": "10.0.0.1",
      "x-forwarded-host": "admin.internal",
      "x-forwarded-proto": "https",
      forwarded: "for=10.0.0.1",
      "x-real-ip": "10.0.0.1",
      "x-request-id": "req_forged",
      "x-gateway-tenant-id": "ten_forged",
    };
    const res = await fetch(server.url(`${G}/billing/plans`), { headers: { ...bearer(alice.token), ...forged } });
    expect(res.status).toBe(200);
    const got = seen.at(-1)!.headers;
    for (const name of ["x-user-id", "x-tenant-id", "x-workspace-id", "x-forwarded-for", "x-forwarded-host", "forwarded", "x-real-ip"])
      expect(got.get(name), name).toBeNull();
    // The mock manager's own HTTP server notes the scheme it was reached by; the caller's value is gone.
    expect(got.get("x-forwarded-proto")).not.toBe("https");
    expect(got.get("x-gateway-tenant-id")).toBe(alice.user.tenantId);
    // The manager is told the service's own id, never the client's ("req_forged", echoed back to it).
    expect(res.headers.get("x-request-id")).toBe("req_forged");
    expect(got.get("x-request-id")).toBe(server.logs().find((line) => line.clientRequestId === "req_forged")!.requestId);
  });

  it("a tenantId in the query must be one of the caller's tenants: the manager is told that tenant; another's or a missing one is 404, never forwarded", async () => {
    const bob = await registerUser(server);
    const team = await server.request(`${G}/tenants`, {
      method: "POST",
      headers: bearer(alice.token),
      json: { slug: `alice-team-${Date.now()}`, name: "Alice team" },
    });
    expect(team.status).toBe(201);
    const teamId = team.body.id as string;
    const own = await fetch(server.url(`${G}/billing/plans?tenantId=${teamId}`), { headers: bearer(alice.token) });
    expect(own.status).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.get("x-gateway-tenant-id")).toBe(teamId);
    expect(seen[0]!.url.search).toBe(`?tenantId=${teamId}`);
    seen = [];
    for (const tenantId of [teamId, bob.user.tenantId]) {
      const other = await server.request(`${G}/billing/plans?tenantId=${tenantId}`, {
        headers: bearer(tenantId === teamId ? bob.token : alice.token),
      });
      const missing = await server.request(`${G}/billing/plans?tenantId=ten_doesnotexist`, {
        headers: bearer(tenantId === teamId ? bob.token : alice.token),
      });
      expect(other.status).toBe(404);
      expect(missing.status).toBe(404);
      expect(other.body.error.code).toBe(missing.body.error.code);
      expect(other.body.error.message).toBe(missing.body.error.message.replace("ten_doesnotexist", tenantId));
    }
    const twice = await server.request(`${G}/billing/plans?tenantId=${teamId}&tenantId=${bob.user.tenantId}`, {
      headers: bearer(alice.token),
    });
    expect(twice.status).toBe(400);
    expect(seen).toHaveLength(0);
  });

  it("passes on a well-formed traceparent and drops a malformed one", async () => {
    respond = () => new HttpResponse("{}", { status: 200, headers: { "content-type": "application/json" } });
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    await (await fetch(server.url(`${G}/billing/plans`), { headers: { ...bearer(alice.token), traceparent } })).text();
    expect(seen.at(-1)!.headers.get("traceparent")).toBe(traceparent);
    await (await fetch(server.url(`${G}/billing/plans`), { headers: { ...bearer(alice.token), traceparent: "not-a-trace" } })).text();
    expect(seen.at(-1)!.headers.get("traceparent")).toBeNull();
  });

  it("forwards a body byte for byte and does not retry a POST", async () => {
    respond = () => HttpResponse.json({ error: "busy" }, { status: 503 });
    const body = new Uint8Array([0, 1, 2, 255, 254]);
    const res = await fetch(server.url(`${G}/billing/invoices`), {
      method: "POST",
      headers: { ...bearer(alice.token), "content-type": "application/octet-stream" },
      body,
    });
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ error: "busy" });
    expect(seen).toHaveLength(1);
    expect([...seen[0]!.body]).toEqual([...body]);
    expect(seen[0]!.headers.get("content-type")).toBe("application/octet-stream");
  });

  it("retries idempotent methods up to GATEWAY_MAX_RETRIES", async () => {
    let calls = 0;
    respond = () => (++calls < 3 ? new HttpResponse(null, { status: 502 }) : HttpResponse.json({ third: true }));
    const res = await server.request(`${G}/billing/subscription`, { method: "PUT", headers: bearer(alice.token), json: { plan: "pro" } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ third: true });
    expect(seen).toHaveLength(3);
    expect(new TextDecoder().decode(seen[2]!.body)).toBe('{"plan":"pro"}');
  });

  it("answers 502 when the manager is down (after the retries of a GET, at once for a PATCH)", async () => {
    respond = () => HttpResponse.error();
    const get = await server.request(`${G}/billing/plans`, { headers: bearer(alice.token) });
    expect(get.status).toBe(502);
    expect(get.body.error.code).toBe("BAD_GATEWAY");
    expect(seen).toHaveLength(3);
    seen = [];
    const patch = await server.request(`${G}/billing/plans`, { method: "PATCH", headers: bearer(alice.token), json: {} });
    expect(patch.status).toBe(502);
    expect(seen).toHaveLength(1);
  });

  it("answers 504 past GATEWAY_TIMEOUT_SECONDS", async () => {
    respond = async () => {
      await delay(2500);
      return HttpResponse.json({ late: true });
    };
    const res = await server.request(`${G}/billing/slow`, { method: "POST", headers: bearer(alice.token), json: {} });
    expect(res.status).toBe(504);
    expect(res.body.error.code).toBe("TIMEOUT");
  });

  it("streams the answer without buffering it", async () => {
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    respond = () =>
      new HttpResponse(
        new ReadableStream({
          async start(controller) {
            controller.enqueue(new TextEncoder().encode("first;"));
            await finished;
            controller.enqueue(new TextEncoder().encode("second"));
            controller.close();
          },
        }),
        { headers: { "content-type": "text/plain" } },
      );
    const res = await fetch(server.url(`${G}/billing/export`), { headers: bearer(alice.token) });
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).toBe("first;");
    finish();
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
    expect(rest).toBe("second");
  });

  it("refuses '..' in the path with 400 and never forwards it", async () => {
    const rest = await server.request(`${G}/billing/a%2F..%2Fadmin`, { headers: bearer(alice.token) });
    expect(rest.status).toBe(400);
    expect(rest.body.error.message).toContain("'..'");
    const rpc = await server.request("/rpc", {
      method: "POST",
      headers: bearer(alice.token),
      json: {
        jsonrpc: "2.0",
        id: 1,
        method: "billing.proxy",
        params: { path: "../admin", request: { method: "GET", search: "", headers: {} } },
      },
    });
    expect(rpc.body.error.code).toBe(-32602);
    expect(seen).toHaveLength(0);
  });

  it("answers 503 when MANAGER_BASE_URL is unset, naming it in the log line only, and 401 without credentials", async () => {
    const bob = await registerUser(unset);
    const res = await unset.request(`${G}/billing/plans`, { headers: bearer(bob.token) });
    expect(res.status).toBe(503);
    expect(res.body.error.message).toBe("The billing service is not configured");
    expect(JSON.stringify(res.body)).not.toContain("MANAGER_BASE_URL");
    expect(unset.logs().find((line) => line.requestId === res.body.error.requestId)).toMatchObject({
      operatorNote: { unsetVariable: "MANAGER_BASE_URL" },
    });
    expect((await server.request(`${G}/billing/plans`)).status).toBe(401);
    expect(seen).toHaveLength(0);
  });
});
