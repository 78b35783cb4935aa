import { randomBytes } from "node:crypto";
import type { Worker } from "node:worker_threads";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResolveHost } from "../../../rpc/outbound/outbound-guard.js";
import { signDelivery, type SendJob } from "../../../rpc/webhooks/send.js";
import { ThreadSender } from "../../../rpc/webhooks/sender.js";
import { WebhookWorker } from "../../../rpc/webhooks/worker.js";
import { eventually } from "../../helpers/eventually.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";

/**
 * The attempt itself (docs/webhooks.md "Delivery threads"): the signature, and a delivery
 * thread that applies the address rule on the address it connects to, with names resolved by
 * the service's resolver.
 */

let receiver: Awaited<ReturnType<typeof startReceiver>>;
const lookups: string[] = [];
/** A public-looking name answering loopback (as a rebinding DNS server would), and a public one. */
const resolveHost: ResolveHost = async (host) => {
  lookups.push(host);
  if (host === "inside.example.com") return [{ address: "127.0.0.1", family: 4 }];
  if (host === "hooks.example.com") return [{ address: "127.0.0.1", family: 4 }];
  throw Object.assign(new Error(`${host} not found`), { code: "ENOTFOUND" });
};
const secret = WebhookWorker.newSecret();
const job = (url: string, overrides: Partial<SendJob> = {}): SendJob => ({
  id: `msg_${randomBytes(6).toString("hex")}`,
  url,
  body: JSON.stringify({ type: "thread.test", timestamp: new Date().toISOString(), data: { n: 1 } }),
  secrets: [secret],
  timeoutMs: 2000,
  ...overrides,
});

beforeAll(async () => {
  receiver = await startReceiver();
  receiver.secrets.push(secret);
});
afterAll(async () => {
  await receiver?.close();
});

describe("signature", () => {
  it("is what standardwebhooks' Webhook.sign computes, and Webhook.verify accepts it", () => {
    for (let i = 0; i < 50; i++) {
      const key = WebhookWorker.newSecret();
      const id = `msg_${randomBytes(8).toString("hex")}`;
      const body = JSON.stringify({ type: "t", data: { text: randomBytes(i * 7).toString("base64"), unicode: "é✓" } });
      const seconds = Math.floor(Date.now() / 1000) - i;
      const ours = signDelivery(key, id, seconds, body);
      expect(ours).toBe(new Webhook(key).sign(id, new Date(seconds * 1000), body));
      const headers = { "webhook-id": id, "webhook-timestamp": String(seconds), "webhook-signature": ours };
      expect(new Webhook(key).verify(body, headers)).toEqual(JSON.parse(body));
    }
  });
});

describe("delivery thread", () => {
  it("refuses loopback at connection time (a literal, and a name the service's resolver answers with loopback), and sends when private addresses are allowed", async () => {
    const strict = new ThreadSender(
      1,
      { allowPrivate: false, hint: "this deployment does not deliver webhooks to private addresses" },
      resolveHost,
    );
    const open = new ThreadSender(1, { allowPrivate: true, hint: "" }, resolveHost);
    try {
      const before = receiver.received.length;
      const literal = await strict.send(job(`http://127.0.0.1:${receiver.port}/strict`));
      expect(literal).toMatchObject({ statusCode: null, error: expect.stringContaining("Refused: 127.0.0.1 is a loopback") });
      const named = await strict.send(job(`http://inside.example.com:${receiver.port}/strict`));
      expect(named).toMatchObject({ statusCode: null, error: expect.stringContaining("inside.example.com resolves to 127.0.0.1") });
      expect(named.error).toContain("this deployment does not deliver webhooks to private addresses");
      const missing = await strict.send(job(`http://nowhere.example.com:${receiver.port}/strict`));
      expect(missing).toMatchObject({ statusCode: null, error: "connection failed (ENOTFOUND)" });
      expect(lookups).toEqual(expect.arrayContaining(["inside.example.com", "nowhere.example.com"]));
      expect(receiver.received.length).toBe(before);

      const sent = job(`http://hooks.example.com:${receiver.port}/open`);
      const ok = await open.send(sent);
      expect(ok).toMatchObject({ statusCode: 200, response: JSON.stringify({ answer: 200 }) });
      const got = receiver.received.at(-1)!;
      expect(got.headers["webhook-id"]).toBe(sent.id);
      expect(got.verified).toEqual(JSON.parse(sent.body));
    } finally {
      await Promise.all([strict.close(), open.close()]);
    }
  });

  it("a thread that dies fails its attempts in flight, and the next attempt starts a new thread", async () => {
    const workers: Worker[] = [];
    const ended: string[] = [];
    const sender = new ThreadSender(1, { allowPrivate: true, hint: "" }, resolveHost, {
      started: (worker) => workers.push(worker),
      ended: (reason) => ended.push(reason),
    });
    try {
      receiver.answers.push("hang");
      const inFlight = sender.send(job(`http://127.0.0.1:${receiver.port}/dies`, { timeoutMs: 30_000 }));
      await eventually(() => receiver.received.some((r) => r.path === "/dies"));
      await workers[0]!.terminate();
      expect(await inFlight).toMatchObject({ statusCode: null, error: expect.stringContaining("delivery thread exited") });
      expect(await sender.send(job(`http://127.0.0.1:${receiver.port}/after`))).toMatchObject({ statusCode: 200 });
      expect(workers).toHaveLength(2);
      expect(ended).toEqual([expect.stringContaining("delivery thread exited")]);
    } finally {
      await sender.close();
    }
  });

  it("closing cuts the attempts in flight: each ends as interrupted by shutdown", async () => {
    const sender = new ThreadSender(1, { allowPrivate: true, hint: "" }, resolveHost);
    receiver.answers.push("hang");
    const inFlight = sender.send(job(`http://127.0.0.1:${receiver.port}/closing`, { timeoutMs: 30_000 }));
    await eventually(() => receiver.received.some((r) => r.path === "/closing"));
    sender.abort();
    expect(await inFlight).toMatchObject({ statusCode: null, error: "interrupted by shutdown" });
    await sender.close();
    expect(await sender.send(job(`http://127.0.0.1:${receiver.port}/closed`))).toMatchObject({ error: "interrupted by shutdown" });
  });
});
