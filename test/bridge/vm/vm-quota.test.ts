import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { connectVm, openSocket, vmSocketUrl, type TestVm } from "../../helpers/vm.js";
import { eventually } from "../../helpers/eventually.js";

/**
 * QUOTA_VM_SOCKETS_PER_TENANT and QUOTA_VM_TOOLS_PER_TENANT (docs/quotas.md) through real `ws`
 * VMs: a socket past the tenant's quota is refused before the upgrade with the bridge's JSON
 * 409; tools past the tenant's total get a JSON-RPC error on tools/register and the socket
 * stays up; another tenant is not affected.
 */
describe("VM sockets and tools per tenant", () => {
  let server: TestServer;
  let alice: Awaited<ReturnType<typeof registerUser>>;
  let bob: Awaited<ReturnType<typeof registerUser>>;
  const vms: TestVm[] = [];

  beforeAll(async () => {
    server = await startTestServer({ QUOTA_VM_SOCKETS_PER_TENANT: "2", QUOTA_VM_TOOLS_PER_TENANT: "5", GATEWAY_RATE_LIMIT_RPM: "100000" });
    [alice, bob] = await Promise.all([registerUser(server), registerUser(server)]);
  });
  afterAll(async () => {
    await Promise.all(vms.map((vm) => vm.close()));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
  });

  const url = (vmId: string) => vmSocketUrl(server.origin, "agent-1", { vmId });
  const connect = async (vmId: string, token: string) => {
    const vm = await connectVm(url(vmId), token);
    vms.push(vm);
    return vm;
  };
  const tools = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}` }));
  const vmTools = async (token: string) =>
    (await server.request("/gateway/v1/mcp/tools?category=vm", { headers: bearer(token) })).body.tools as { name: string }[];

  it("refuses the tenant's third socket with the bridge's 409, lets a VM reconnect in its own place, and leaves another tenant alone", async () => {
    const one = await connect("a-one", alice.token);
    const two = await connect("a-two", alice.token);
    const refused = await openSocket(url("a-three"), { headers: bearer(alice.token) }).then(
      () => undefined,
      (error: { status: number; body: string; headers: Record<string, string> }) => error,
    );
    expect(refused?.status).toBe(409);
    expect(JSON.parse(refused!.body)).toEqual({
      error: {
        code: "CONFLICT",
        message: "Quota reached: this tenant has 2 VM socket(s) open, the most allowed (limit 2); close one first",
        requestId: refused!.headers["x-request-id"],
        details: {
          quota: "vm_sockets_per_tenant",
          limit: 2,
          count: 2,
          tenantId: alice.user.tenantId,
        },
      },
    });

    // A VM that reconnects while its old socket is still up keeps its place: admitted at the limit, the old socket replaced.
    const again = await connect("a-one", alice.token);
    expect((await one.closed).code).toBe(4001);

    // Bob's tenant has places of its own.
    const bobs = [await connect("b-one", bob.token), await connect("b-two", bob.token)];

    // A socket that closes gives its place back.
    await two.close();
    const three = await eventually(() =>
      connectVm(url("a-three"), alice.token).then(
        (vm) => (vms.push(vm), vm),
        () => undefined,
      ),
    );
    expect(three).toBeDefined();
    for (const vm of [again, three!, ...bobs]) await vm.close();
  });

  it("refuses tools past the tenant's total with a JSON-RPC error; the socket stays up and keeps its list", async () => {
    // The sockets of the test before give their places back as the server sees them close.
    const first = (await eventually(() => connect("t-one", alice.token).catch(() => undefined)))!;
    const second = (await eventually(() => connect("t-two", alice.token).catch(() => undefined)))!;
    expect(await first.register(tools("x", 3))).toEqual({ tools: ["x0", "x1", "x2"] });
    expect(await second.register(tools("y", 1))).toEqual({ tools: ["y0"] });

    const error = await second.rpc.requestAdvanced({ jsonrpc: "2.0", id: 77, method: "tools/register", params: { tools: tools("y", 3) } });
    expect(error.error).toEqual({
      code: -32009,
      message: "Quota reached: this tenant's VMs announce 4 tool(s), the most allowed (limit 5); announce fewer: this VM announces 3",
      data: {
        quota: "vm_tools_per_tenant",
        limit: 5,
        count: 4,
        tenantId: alice.user.tenantId,
        requested: 3,
      },
    });
    // Still connected, still listing its earlier tool; a list that fits is taken.
    expect((await vmTools(alice.token)).map((tool) => tool.name).sort()).toEqual([
      "vm__t-one__x0",
      "vm__t-one__x1",
      "vm__t-one__x2",
      "vm__t-two__y0",
    ]);
    expect(await second.register(tools("y", 2))).toEqual({ tools: ["y0", "y1"] });
    // Re-announcing no more than before always fits.
    expect(await first.register(tools("z", 3))).toEqual({ tools: ["z0", "z1", "z2"] });

    // Bob's VMs announce their own five.
    const bobs = (await eventually(() => connect("b-tools", bob.token).catch(() => undefined)))!;
    expect(await bobs.register(tools("b", 5))).toMatchObject({ tools: expect.any(Array) });
    expect(await vmTools(bob.token)).toHaveLength(5);

    // A VM leaving frees its tools for the others.
    await first.close();
    await eventually(async () => {
      const res = await second.rpc.requestAdvanced({ jsonrpc: "2.0", id: 78, method: "tools/register", params: { tools: tools("y", 5) } });
      return res.result ? res : undefined;
    });
    await second.close();
    await bobs.close();
  });

  it("lets N concurrent sockets at the edge take exactly the places left", async () => {
    const carol = await registerUser(server);
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, (_, i) => openSocket(url(`c-${i}`), { headers: bearer(carol.token) })),
    );
    const opened = results.filter((result) => result.status === "fulfilled");
    expect(opened).toHaveLength(2);
    const statuses = results.filter((result) => result.status === "rejected").map((result) => (result.reason as { status: number }).status);
    expect(statuses).toEqual([409, 409, 409, 409]);
    for (const result of opened) result.value.close();
  });
});
