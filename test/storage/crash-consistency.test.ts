import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:http";
import { mkdtemp, readdir, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import OpenAI from "openai";
import { instanceRequest, startInstance, type Instance } from "../helpers/instances.js";
import { newUserBody, TEST_JWT_SECRET } from "../helpers/server.js";
import { consoleCookieFrom } from "../helpers/console.js";
import { dropRedisPrefix, TEST_REDIS_URL, uniqueRedisPrefix } from "../helpers/redis.js";
import { openStore, type Store } from "../../storage/store.js";
import { LedgerRepo } from "../../storage/repos/ledger.js";
import { CreditsRepo } from "../../storage/repos/credits.js";
import { countPromptTokens } from "../../rpc/chat/tokens.js";

/**
 * kill -9 at any point (docs/crash-consistency.md): a server process is killed mid-batch of
 * registrations, agent creates and chats whose upstream never answers; after the next start
 * every acknowledged record is there, unfinished registrations can be made again, each
 * tenant's agent count equals its agents, no temporary file is left, and the dead process's
 * credit holds are released. Also: credits for N requests admit N of 5×N concurrent ones
 * across two spawned instances on one Redis.
 */

const G = "/gateway/v1";
let upstream: Server;
let upstreamUrl: string;
let upstreamCalls = 0;
const dirs: string[] = [];
const prefixes: string[] = [];

beforeAll(async () => {
  // An upstream that takes every chat request and never answers: those requests hold credits when the server dies.
  upstream = createServer((req) => {
    if (req.url?.endsWith("/chat/completions")) upstreamCalls += 1;
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const address = upstream.address() as { port: number };
  upstreamUrl = `http://127.0.0.1:${address.port}/v1`;
});
afterAll(async () => {
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  for (const prefix of prefixes) await dropRedisPrefix(prefix);
});

const PRICE = { input: 1000, output: 2000 };
const models = () =>
  JSON.stringify({
    models: { echo: { provider: "echo", price: PRICE }, stuck: { provider: "openai-compatible", baseURL: upstreamUrl, price: PRICE } },
  });
const messages = [{ role: "user" as const, content: "x" }];
const perRequest = Math.ceil((countPromptTokens(messages) * PRICE.input + PRICE.output) / 1000);

async function register(origin: string, body = newUserBody()) {
  const res = await instanceRequest(origin, `${G}/auth/register`, { method: "POST", json: body });
  return {
    ...body,
    status: res.status,
    token: res.body?.token as string,
    user: res.body?.user as { id: string; workspaceId: string; tenantId: string },
  };
}

async function platformKey(origin: string, email: string, password: string): Promise<string> {
  const session = await fetch(`${origin}/api/session`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
  const cookie = consoleCookieFrom(session.headers)!;
  const created = await fetch(`${origin}/api/api-keys`, {
    method: "POST",
    headers: { "content-type": "application/json", cookie: cookie.pair },
    body: JSON.stringify({ name: "crash" }),
  });
  return ((await created.json()) as { key: string }).key;
}

async function tempFiles(dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).filter((entry) => entry.endsWith(".tmp"));
}

function deadPid(): number {
  return spawnSync(process.execPath, ["-e", ""]).pid!;
}

interface Batch {
  ackedUsers: { email: string; password: string; fullName: string }[];
  pendingUsers: { email: string; password: string; fullName: string }[];
  ackedAgents: string[];
}

/** Runs registrations, agent creates and stuck chats against `origin` and kills `instance` in the middle. */
async function killMidBatch(instance: Instance, owner: { token: string; key: string }, tenantId: string): Promise<Batch> {
  const batch: Batch = { ackedUsers: [], pendingUsers: [], ackedAgents: [] };
  const origin = instance.origin;
  const chats = Array.from({ length: 6 }, () =>
    fetch(`${origin}/api/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${owner.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "stuck", messages, max_tokens: 10 }),
    }).catch(() => undefined),
  );
  await vi.waitFor(() => expect(upstreamCalls).toBeGreaterThanOrEqual(6), { timeout: 10_000 });
  let killed = false;
  const registrations = Array.from({ length: 24 }, async (_, i) => {
    const body = newUserBody({ email: `crash-${Date.now().toString(36)}-${i}@example.com` });
    batch.pendingUsers.push(body);
    const res = await register(origin, body).catch(() => undefined);
    if (res?.status === 201) {
      batch.ackedUsers.push(body);
      batch.pendingUsers.splice(batch.pendingUsers.indexOf(body), 1);
    }
  });
  const agents = Array.from({ length: 16 }, async (_, i) => {
    const res = await instanceRequest(origin, `${G}/agents`, {
      method: "POST",
      token: owner.token,
      json: { name: `a${i}`, model: "echo", tools: [], tenantId },
    }).catch(() => undefined);
    if (res?.status === 201) batch.ackedAgents.push(res.body.id);
  });
  // Kill once some work was acknowledged and more is in flight.
  await vi.waitFor(() => expect(batch.ackedUsers.length + batch.ackedAgents.length).toBeGreaterThanOrEqual(4), { timeout: 20_000 });
  instance.process.kill("SIGKILL");
  killed = true;
  await Promise.all([...registrations, ...agents, ...chats]);
  expect(killed).toBe(true);
  return batch;
}

async function checkAfterRestart(origin: string, batch: Batch, owner: { token: string }, tenantId: string) {
  for (const user of batch.ackedUsers) {
    const login = await instanceRequest(origin, `${G}/auth/login`, {
      method: "POST",
      json: { email: user.email, password: user.password },
    });
    expect(login.status, user.email).toBe(200);
  }
  for (const user of batch.pendingUsers) {
    const again = await register(origin, user);
    if (again.status === 409) {
      // It completed but the answer never left: the account is whole.
      const login = await instanceRequest(origin, `${G}/auth/login`, {
        method: "POST",
        json: { email: user.email, password: user.password },
      });
      expect(login.status, user.email).toBe(200);
    } else {
      expect(again.status, user.email).toBe(201);
    }
  }
  const agents = (await instanceRequest(origin, `${G}/agents`, { token: owner.token })).body as { id: string; tenantId: string }[];
  for (const id of batch.ackedAgents) expect(agents.map((agent) => agent.id)).toContain(id);
  const tenant = (await instanceRequest(origin, `${G}/tenants/${tenantId}`, { token: owner.token })).body;
  expect(tenant.usage.agents).toBe(agents.filter((agent) => agent.tenantId === tenantId).length);
  // A create after the crash still sees the true count.
  const created = await instanceRequest(origin, `${G}/agents`, {
    method: "POST",
    token: owner.token,
    json: { name: "after", model: "echo", tools: [], tenantId },
  });
  expect(created.status).toBe(201);
  expect((await instanceRequest(origin, `${G}/tenants/${tenantId}`, { token: owner.token })).body.usage.agents).toBe(
    tenant.usage.agents + 1,
  );
}

describe("kill -9 of a server on fs", () => {
  it("loses no acknowledged record, frees unfinished registrations, keeps agent counts, leaves no .tmp and releases holds", async () => {
    const dir = await mkdtemp(join(tmpdir(), "gw-crash-"));
    dirs.push(dir);
    const env = { STORAGE: "fs", DATA_DIR: dir, MODELS_JSON: models(), LOG_LEVEL: "error", MODEL_TIMEOUT_SECONDS: "600" };
    let instance = await startInstance(env);
    const ownerBody = newUserBody();
    const owner = await register(instance.origin, ownerBody);
    const key = await platformKey(instance.origin, ownerBody.email, ownerBody.password);
    const tenant = (
      await instanceRequest(instance.origin, `${G}/tenants`, {
        method: "POST",
        token: owner.token,
        json: { slug: `crash-${Date.now()}`, name: "Crash", limits: { agents: 100, tokensPerMonth: 1_000_000 } },
      })
    ).body;
    // Credits granted beside the running server, as the admin command does: through the
    // server, which owns DATA_DIR.
    const side: Store = await openStore(
      { STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" },
      { whenOwned: "connect" },
    );
    const granted = 1_000_000;
    await new CreditsRepo(side).grant(owner.user.workspaceId, granted);
    await side.close();
    upstreamCalls = 0;

    const batch = await killMidBatch(instance, { token: owner.token, key }, tenant.id);
    // Opened as the next owner (the dead server's lock is taken over at once): the holds of
    // its requests in flight were kept in its memory only, never written down...
    const after = await openStore({ STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" });
    const credits = new LedgerRepo(after).credits(owner.user.workspaceId);
    expect(await after.kv.getItem(`atomic:${credits.key}`)).toEqual({ v: String(granted) });
    await after.close();
    // ...and a blob writer killed between write and rename leaves a temporary file like this one.
    await mkdir(join(dir, "artifact-blobs"), { recursive: true });
    await writeFile(join(dir, "artifact-blobs", `art_torn.${deadPid()}-0123456789ab.tmp`), '{"half":');

    instance = await startInstance(env);
    const live = await openStore(
      { STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" },
      { whenOwned: "connect" },
    );
    const ledger = new LedgerRepo(live);
    try {
      expect(await tempFiles(dir)).toEqual([]);
      // Holds of a process that is gone do not count: the whole balance is available again.
      expect(await ledger.state(credits)).toMatchObject({ value: granted, held: 0 });
      const client = new OpenAI({ baseURL: `${instance.origin}/api/v1`, apiKey: key, maxRetries: 0 });
      await client.chat.completions.create({ model: "echo", messages, max_tokens: 1 });
      expect(await ledger.state(credits)).toMatchObject({ value: granted - perRequest, held: 0 });
      await checkAfterRestart(instance.origin, batch, owner, tenant.id);
    } finally {
      await live.close();
      await instance.stop();
    }
  }, 120_000);

  it("keeps every acknowledged charge of a load of concurrent chats, exactly once", async () => {
    // A provider that answers at once with fixed usage, until told to hold back: then it keeps
    // the new requests (their credit holds are placed, so writes go on) and answers none.
    let answering = true;
    let answered = 0;
    const parked: import("node:http").ServerResponse[] = [];
    const provider = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        if (!answering) return void parked.push(res);
        answered += 1;
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: "chatcmpl-1",
            object: "chat.completion",
            created: 0,
            model: "paid",
            choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
            usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => provider.listen(0, "127.0.0.1", resolve));
    const providerUrl = `http://127.0.0.1:${(provider.address() as { port: number }).port}/v1`;
    const dir = await mkdtemp(join(tmpdir(), "gw-crash-money-"));
    dirs.push(dir);
    const env = {
      STORAGE: "fs",
      DATA_DIR: dir,
      LOG_LEVEL: "error",
      MODEL_TIMEOUT_SECONDS: "600",
      MODELS_JSON: JSON.stringify({ models: { paid: { provider: "openai-compatible", baseURL: providerUrl, price: PRICE } } }),
    };
    let instance = await startInstance(env);
    try {
      const ownerBody = newUserBody();
      const owner = await register(instance.origin, ownerBody);
      const key = await platformKey(instance.origin, ownerBody.email, ownerBody.password);
      const granted = 100_000_000;
      let side = await openStore(
        { STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" },
        { whenOwned: "connect" },
      );
      await new CreditsRepo(side).grant(owner.user.workspaceId, granted);
      const credits = new LedgerRepo(side).credits(owner.user.workspaceId);
      const client = new OpenAI({ baseURL: `${instance.origin}/api/v1`, apiKey: key, maxRetries: 0 });
      const request = () => client.chat.completions.create({ model: "paid", messages: [{ role: "user", content: "x" }], max_tokens: 5 });
      await request();
      const perRequest = granted - (await new LedgerRepo(side).state(credits)).value;
      expect(perRequest).toBeGreaterThan(0);
      await side.close();

      let acknowledged = 1;
      let stopped = false;
      const loops = Array.from({ length: 24 }, async () => {
        while (!stopped) {
          try {
            await request();
            acknowledged += 1;
          } catch {
            return;
          }
        }
      });
      // Hundreds of charges settle; then the provider holds back, every answer it gave is
      // acknowledged, new requests keep placing holds — and the server is killed.
      await vi.waitFor(() => expect(answered).toBeGreaterThanOrEqual(400), { timeout: 60_000, interval: 20 });
      answering = false;
      await vi.waitFor(() => expect(acknowledged).toBe(answered), { timeout: 20_000, interval: 5 });
      await vi.waitFor(() => expect(parked.length).toBeGreaterThanOrEqual(12), { timeout: 20_000, interval: 5 });
      instance.process.kill("SIGKILL");
      stopped = true;
      for (const res of parked) res.destroy();
      await Promise.all(loops);
      expect(acknowledged).toBe(answered);

      instance = await startInstance(env);
      side = await openStore({ STORAGE: "fs", DATA_DIR: dir, REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: "unused" }, { whenOwned: "connect" });
      try {
        // Every acknowledged charge, none twice, nothing for the requests the kill cut.
        expect(await new LedgerRepo(side).state(credits)).toMatchObject({ value: granted - acknowledged * perRequest, held: 0 });
      } finally {
        await side.close();
      }
    } finally {
      await instance.stop();
      provider.closeAllConnections();
      await new Promise((resolve) => provider.close(resolve));
    }
  }, 180_000);
});

describe("two spawned instances on one Redis", () => {
  const prefix = uniqueRedisPrefix();
  prefixes.push(prefix);
  const env = () => ({
    STORAGE: "redis",
    REDIS_PREFIX: prefix,
    REDIS_URL: TEST_REDIS_URL,
    GATEWAY_JWT_SECRET: TEST_JWT_SECRET,
    MODELS_JSON: models(),
    LOG_LEVEL: "error",
    MODEL_TIMEOUT_SECONDS: "600",
    HOLD_LEASE_SECONDS: "30",
  });
  let a: Instance;
  let b: Instance;
  let side: Store;

  beforeAll(async () => {
    [a, b] = await Promise.all([startInstance(env()), startInstance(env())]);
    side = await openStore({ STORAGE: "redis", DATA_DIR: "unused", REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await side?.close();
  });

  it("credits for exactly N requests admit N of 5×N concurrent ones through the official client", async () => {
    const N = 10;
    const body = newUserBody();
    const user = await register(a.origin, body);
    const key = await platformKey(b.origin, body.email, body.password);
    await new CreditsRepo(side).grant(user.user.workspaceId, N * perRequest);
    const clients = [a, b].map((instance) => new OpenAI({ baseURL: `${instance.origin}/api/v1`, apiKey: key, maxRetries: 0 }));
    const statuses = await Promise.all(
      Array.from({ length: 5 * N }, (_, i) =>
        clients[i % 2]!.chat.completions.create({ model: "echo", messages, max_tokens: 1 }).then(
          () => 200,
          (error: { status?: number }) => error.status ?? 0,
        ),
      ),
    );
    expect(statuses.filter((status) => status === 200)).toHaveLength(N);
    expect(statuses.filter((status) => status === 402)).toHaveLength(4 * N);
    const ledger = new LedgerRepo(side);
    expect(await ledger.state(ledger.credits(user.user.workspaceId))).toMatchObject({ value: 0, held: 0 });
  }, 60_000);

  it("after kill -9 of one instance, the other has every acknowledged record and the dead one's holds expire with their lease", async () => {
    const ownerBody = newUserBody();
    const owner = await register(b.origin, ownerBody);
    const key = await platformKey(b.origin, ownerBody.email, ownerBody.password);
    const tenant = (
      await instanceRequest(b.origin, `${G}/tenants`, {
        method: "POST",
        token: owner.token,
        json: { slug: `crash-r-${Date.now()}`, name: "Crash", limits: { agents: 100, tokensPerMonth: 1_000_000 } },
      })
    ).body;
    const ledger = new LedgerRepo(side);
    const credits = ledger.credits(owner.user.workspaceId);
    await new CreditsRepo(side).grant(owner.user.workspaceId, 1_000_000);
    upstreamCalls = 0;
    const batch = await killMidBatch(a, { token: owner.token, key }, tenant.id);
    const held = await ledger.state(credits);
    expect(held.held).toBe(6 * Math.ceil((countPromptTokens(messages) * PRICE.input + 10 * PRICE.output) / 1000));
    await checkAfterRestart(b.origin, batch, owner, tenant.id);
    // Past the lease (HOLD_LEASE_SECONDS=30) the next ledger operation releases them.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 31_000 });
    try {
      expect(await ledger.state(credits)).toMatchObject({ value: 1_000_000, held: 0 });
    } finally {
      vi.useRealTimers();
    }
  }, 120_000);
});
