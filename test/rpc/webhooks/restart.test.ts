import type { WebhooksDeps } from "../../../rpc/webhooks/deps.js";
import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it, vi } from "vitest";
import { bearer, registerUser, startTestServer } from "../../helpers/server.js";
import { startReceiver } from "../../helpers/webhook-receiver.js";
import { eventually } from "../../helpers/eventually.js";

const dirs: string[] = [];
afterAll(async () => {
  vi.useRealTimers();
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => join(entry.parentPath, entry.name));
}

it("a pending delivery survives a restart on fs, and the secret is never on disk in the clear", async () => {
  const dir = await mkdtemp(join(tmpdir(), "gw-webhooks-"));
  dirs.push(dir);
  const env = { STORAGE: "fs", DATA_DIR: dir, WEBHOOKS_ALLOW_PRIVATE: "true", WEBHOOKS_POLL_MS: "0" };
  const receiver = await startReceiver();
  try {
    let server = await startTestServer(env);
    const user = await registerUser(server);
    const sub = (
      await server.request("/gateway/v1/webhooks/subscriptions", {
        method: "POST",
        headers: bearer(user.token),
        json: { url: `http://127.0.0.1:${receiver.port}/r` },
      })
    ).body;
    receiver.secrets.push(sub.secret);
    receiver.answers.push(500);
    await server.request("/gateway/v1/events", {
      method: "POST",
      headers: bearer(user.token),
      json: { topic: "x", type: "x.y", payload: {} },
    });
    const delivery = await eventually(async () =>
      (await server.composition.ports.repos.webhooks.listDeliveries(user.user.tenantId)).find((d) => d.attempts.length === 1),
    );
    await server.close();

    for (const file of await filesUnder(dir)) expect(await readFile(file, "utf8")).not.toContain(sub.secret.slice(6));

    server = await startTestServer(env);
    try {
      vi.useFakeTimers({ toFake: ["Date"] });
      vi.setSystemTime(Date.parse(delivery!.nextAttemptAt!) + 1);
      expect(await server.composition.deps<WebhooksDeps>("webhooks").webhookWorker.tick()).toBe(1);
      vi.useRealTimers();
      const after = await server.composition.ports.repos.webhooks.getDelivery(delivery!.id);
      expect(after).toMatchObject({ status: "succeeded" });
      expect(after!.attempts.map((a) => a.statusCode)).toEqual([500, 200]);
      expect(receiver.received.at(-1)!.error).toBeUndefined();
    } finally {
      vi.useRealTimers();
      await server.close();
    }
  } finally {
    await receiver.close();
  }
});
