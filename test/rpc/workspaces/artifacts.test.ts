import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { TEST_REDIS_URL, dropRedisPrefix, uniqueRedisPrefix } from "../../helpers/redis.js";

const G = "/gateway/v1";
const LIMIT = 4096;

for (const driver of ["memory", "fs", "redis"] as const) {
  describe(`artifacts on ${driver}`, () => {
    let server: TestServer;
    let dir = "";
    const prefix = uniqueRedisPrefix();
    let alice: Awaited<ReturnType<typeof registerUser>>;
    let ws = "";
    const base = () => `${G}/workspaces/${ws}/artifacts`;

    beforeAll(async () => {
      dir = await mkdtemp(join(tmpdir(), "artifacts-"));
      server = await startTestServer({ STORAGE: driver, DATA_DIR: dir, REDIS_PREFIX: prefix, GATEWAY_MAX_PAYLOAD_BYTES: String(LIMIT) });
      alice = await registerUser(server);
      ws = alice.user.workspaceId;
    }, 30_000);
    afterAll(async () => {
      await server?.close();
      await rm(dir, { recursive: true, force: true });
      if (driver === "redis") await dropRedisPrefix(prefix);
    });

    it("stores raw bytes with size, SHA-256 and type, and serves them with ETag and Content-Disposition", async () => {
      const bytes = randomBytes(1000);
      const up = await fetch(server.url(`${base()}?name=${encodeURIComponent("report é.bin")}`), {
        method: "POST",
        headers: { ...bearer(alice.token), "content-type": "application/x-test" },
        body: bytes,
      });
      expect(up.status).toBe(201);
      const artifact = (await up.json()) as any;
      const sha = createHash("sha256").update(bytes).digest("hex");
      expect(artifact).toMatchObject({ name: "report é.bin", contentType: "application/x-test", size: 1000, sha256: sha, workspaceId: ws });
      const meta = await server.request(`${base()}/${artifact.id}`, { headers: bearer(alice.token) });
      expect(meta.body.sha256).toBe(sha);
      const content = await fetch(server.url(`${base()}/${artifact.id}/content`), { headers: bearer(alice.token) });
      expect(content.status).toBe(200);
      expect(content.headers.get("content-type")).toBe("application/x-test");
      expect(content.headers.get("etag")).toBe(`"${sha}"`);
      expect(content.headers.get("content-disposition")).toContain("filename*=UTF-8''report%20%C3%A9.bin");
      expect(Buffer.from(await content.arrayBuffer()).equals(bytes)).toBe(true);
      const cached = await fetch(server.url(`${base()}/${artifact.id}/content`), {
        headers: { ...bearer(alice.token), "if-none-match": `"${sha}"` },
      });
      expect(cached.status).toBe(304);
      if (driver === "redis") {
        const redis = new Redis(TEST_REDIS_URL);
        const stored = await redis.getBuffer(`${prefix}:kv:artifact-blobs:${artifact.id}`);
        redis.disconnect();
        expect(stored?.equals(bytes)).toBe(true);
      }
      if (driver === "fs") expect((await readFile(join(dir, "artifact-blobs", artifact.id))).equals(bytes)).toBe(true);
    });

    it("takes JSON with base64 content, lists with a cursor, and deletes", async () => {
      const ids: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        const res = await server.request(base(), {
          method: "POST",
          headers: bearer(alice.token),
          json: { name: `n${i}.txt`, contentType: "text/plain", content: Buffer.from(`hello ${i}`).toString("base64") },
        });
        expect(res.status).toBe(201);
        expect(res.body.size).toBe(7);
        ids.push(res.body.id);
      }
      const first = await server.request(`${base()}?limit=2`, { headers: bearer(alice.token) });
      expect(first.body.artifacts).toHaveLength(2);
      const second = await server.request(`${base()}?limit=2&cursor=${first.body.next}`, { headers: bearer(alice.token) });
      const seen = [...first.body.artifacts, ...second.body.artifacts].map((a: any) => a.id);
      expect(seen.slice(-3)).toEqual(ids);
      const text = await fetch(server.url(`${base()}/${ids[1]}/content`), { headers: bearer(alice.token) });
      expect(await text.text()).toBe("hello 1");
      expect((await server.request(`${base()}/${ids[1]}`, { method: "DELETE", headers: bearer(alice.token) })).status).toBe(200);
      expect((await server.request(`${base()}/${ids[1]}`, { headers: bearer(alice.token) })).status).toBe(404);
      expect((await server.request(`${base()}/${ids[1]}/content`, { headers: bearer(alice.token) })).status).toBe(404);
    });

    it("answers bad uploads in the Gateway envelope, and refuses uploads to an archived workspace", async () => {
      const raw = (query: string, body?: Uint8Array, type = "application/octet-stream") =>
        fetch(server.url(`${base()}${query}`), { method: "POST", headers: { ...bearer(alice.token), "content-type": type }, body });
      const noName = await raw("", new Uint8Array([1]));
      expect(noName.status).toBe(400);
      expect(((await noName.json()) as any).error.message).toContain("name");
      const empty = await raw("?name=x");
      expect(empty.status).toBe(400);
      expect(((await empty.json()) as any).error.message).toContain("empty");
      const big = await raw("?name=x", new Uint8Array(LIMIT + 1));
      expect(big.status).toBe(413);
      expect(((await big.json()) as any).error.code).toBe("PAYLOAD_TOO_LARGE");
      const badBase64 = await server.request(base(), {
        method: "POST",
        headers: bearer(alice.token),
        json: { name: "x", content: "not base64!" },
      });
      expect(badBase64.status).toBe(400);
      expect(badBase64.body.error.message).toContain("not valid base64");
      const jsonNoName = await server.request(base(), { method: "POST", headers: bearer(alice.token), json: { content: "aGk=" } });
      expect(jsonNoName.status).toBe(400);
      const emptyJson = await server.request(base(), { method: "POST", headers: bearer(alice.token), json: { name: "x", content: "" } });
      expect(emptyJson.status).toBe(400);
      const bob = await registerUser(server);
      expect((await server.request(base(), { headers: bearer(bob.token) })).status).toBe(404);
      await server.request(`${G}/workspaces/${ws}?status=archived`, { method: "PATCH", headers: bearer(alice.token) });
      const archived = await raw("?name=x", new Uint8Array([1]));
      expect(archived.status).toBe(403);
      expect(((await archived.json()) as any).error.message).toContain("archived");
      await server.request(`${G}/workspaces/${ws}?status=active`, { method: "PATCH", headers: bearer(alice.token) });
      expect((await raw("?name=x", new Uint8Array([1]))).status).toBe(201);
    });
  });
}
