import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { platformAccount } from "../../helpers/chat.js";
import { withCookie } from "../../helpers/console.js";
import { generateKey } from "../../../rpc/credentials/api-keys.js";
import { newId, nowIso, sha256Hex } from "../../../storage/ids.js";

/**
 * No part of a key's secret is stored (docs/interface.md 2.4/5: only the hash): a record keeps the
 * key's hash and its public id, the random first 8 characters of the body that are not part of the
 * secret; listings show the kind's prefix and that public id. Records made before public ids kept
 * the secret's first characters (`hint`): their keys still work and still list as they did.
 */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

const chatBody = { model: "echo-1", messages: [{ role: "user", content: "hi" }], max_tokens: 5 };

describe("key records", () => {
  it("store the hash and the public id of every kind of key, never a part of its secret", async () => {
    const user = await registerUser(server);
    const gateway = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "ci" } });
    const account = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "cli" } });
    const platform = await platformAccount(server);
    const { repos } = server.composition.ports;
    const made = [
      { key: gateway.body.key as string, owner: user.user.id, id: gateway.body.id as string, prefix: "sk_" },
      { key: account.body.key as string, owner: user.user.id, id: account.body.id as string, prefix: "acct_" },
      { key: platform.key, owner: platform.workspaceId, id: platform.keyId, prefix: "sk-gateway-" },
    ];
    for (const { key, owner, id, prefix } of made) {
      expect(key.startsWith(prefix), key).toBe(true);
      const record = (await repos.keys.get(owner, id))!;
      expect(record.hash).toBe(sha256Hex(key));
      expect(record.hint).toBeUndefined();
      expect(record.publicId).toBe(key.slice(prefix.length, prefix.length + 8));
      // The secret part (after the public id) appears nowhere in the record, not even its first characters.
      const secretPart = key.slice(prefix.length + 8);
      expect(JSON.stringify(record)).not.toContain(secretPart.slice(0, 4));
    }
    expect(gateway.body.prefix).toBe(`sk_${made[0]!.key.slice(3, 11)}…`);
    expect(account.body.prefix).toBe(`acct_${made[1]!.key.slice(5, 13)}…`);
    const listed = await server.request("/gateway/v1/auth/keys", { headers: bearer(user.token) });
    expect(listed.body.find((entry: { id: string }) => entry.id === gateway.body.id).prefix).toBe(gateway.body.prefix);
    // The console's listing shows neither (docs/interface.md 4.3: id, name, createdAt, …).
    const consoleList = await server.request("/api/api-keys", { headers: withCookie(platform.cookie) });
    const entry = (consoleList.body.data ?? consoleList.body).find((item: { id: string }) => item.id === platform.keyId);
    expect(entry).toBeDefined();
    expect(entry.prefix).toBeUndefined();
    expect(entry.publicId).toBeUndefined();
    expect(JSON.stringify(entry)).not.toContain(platform.key.slice(11, 19));
  });

  it("keep a key made before public ids working, listed by the hint it was stored with", async () => {
    const user = await registerUser(server);
    const prefixes = server.composition.ports.keyPrefixes;
    // A record as the service wrote it before public ids: `hint` holds the secret's first characters.
    const { secret } = generateKey(prefixes, "gateway");
    const id = newId("key");
    await server.composition.ports.repos.keys.create({
      id,
      kind: "gateway",
      owner: user.user.id,
      userId: user.user.id,
      name: "old",
      hash: sha256Hex(secret),
      hint: `${secret.slice(0, 7)}…`,
      scopes: [],
      createdAt: nowIso(),
      expiresAt: null,
      lastUsedAt: null,
      revokedAt: null,
      spendLimit: null,
      rpmLimit: null,
      tpmLimit: null,
    });
    const answer = await server.request("/gateway/v1/chat/completions", { method: "POST", headers: bearer(secret), json: chatBody });
    expect(answer.status).toBe(200);
    const listed = await server.request("/gateway/v1/auth/keys", { headers: bearer(user.token) });
    expect(listed.body.find((entry: { id: string }) => entry.id === id).prefix).toBe(`${secret.slice(0, 7)}…`);
  });

  it("are another tenant's 404 like a missing key", async () => {
    const alice = await registerUser(server);
    const bob = await registerUser(server);
    const made = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(alice.token), json: { name: "a" } });
    const foreign = await server.request(`/gateway/v1/auth/keys/${made.body.id}`, { method: "DELETE", headers: bearer(bob.token) });
    const missing = await server.request("/gateway/v1/auth/keys/key_missing", { method: "DELETE", headers: bearer(bob.token) });
    expect(foreign.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(foreign.body.error.message).toBe(missing.body.error.message.replace("key_missing", made.body.id));
  });
});
