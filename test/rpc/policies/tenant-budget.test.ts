import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";
import { enforceTenantBudget } from "../../../rpc/policies/tenant-budget.js";
import { isServiceError } from "../../../rpc/errors.js";
import type { Principal } from "../../../rpc/auth.js";

/**
 * docs/quotas.md "Gateway budget per tenant": GATEWAY_TENANT_RATE_LIMIT_RPM for all of a
 * tenant's users and keys together, shared by two instances on one Redis. Two tenants: one
 * at its budget, the other unaffected.
 */
const prefix = uniqueRedisPrefix();
let a: TestServer & { budget: Parameters<typeof enforceTenantBudget>[1] };
let b: typeof a;
const withPorts = (server: TestServer) => Object.assign(server, { budget: { config: server.composition.ports.config, store: server.composition.ports.store, users: server.composition.ports.repos.users } });

beforeAll(async () => {
  const env = { STORAGE: "redis", REDIS_PREFIX: prefix, GATEWAY_TENANT_RATE_LIMIT_RPM: "10" };
  [a, b] = (await Promise.all([startTestServer(env), startTestServer(env)])).map(withPorts) as [typeof a, typeof a];
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await dropRedisPrefix(prefix);
});

async function refusal(call: Promise<void>) {
  try {
    await call;
    return undefined;
  } catch (error) {
    if (isServiceError(error)) return error;
    throw error;
  }
}

describe("Gateway budget per tenant", () => {
  it("counts every credential of a tenant together across instances; another tenant keeps its own budget", async () => {
    const [alice, bob] = [await registerUser(a), await registerUser(b)];
    // Two credentials of Alice's tenant (a session and a key), spread over both instances.
    const aliceSession: Principal = { kind: "session", userId: alice.user.id, scopes: [] };
    const aliceKey: Principal = { kind: "gateway_key", userId: alice.user.id, scopes: [] };
    const bobSession: Principal = { kind: "session", userId: bob.user.id, scopes: [] };
    for (let i = 0; i < 10; i++) expect(await refusal(enforceTenantBudget(i % 2 ? aliceKey : aliceSession, (i % 3 ? a : b).budget))).toBeUndefined();
    const refused = await refusal(enforceTenantBudget(aliceKey, a.budget));
    expect(refused?.code).toBe("RATE_LIMITED");
    expect(refused?.status).toBe(429);
    expect(Number(refused?.headers?.["retry-after"])).toBeGreaterThan(0);
    expect(refused?.details).toMatchObject({ scope: "tenant", tenantId: alice.user.tenantId, limit: 10, variable: "GATEWAY_TENANT_RATE_LIMIT_RPM" });
    expect((await refusal(enforceTenantBudget(aliceSession, b.budget)))?.code).toBe("RATE_LIMITED");
    // Bob's tenant is untouched.
    for (let i = 0; i < 10; i++) expect(await refusal(enforceTenantBudget(bobSession, i % 2 ? a.budget : b.budget))).toBeUndefined();
    expect((await refusal(enforceTenantBudget(bobSession, a.budget)))?.code).toBe("RATE_LIMITED");
  }, 60_000);
});
