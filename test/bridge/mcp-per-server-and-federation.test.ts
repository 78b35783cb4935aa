import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import {
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { mcpSessionsOf } from "../../bridge/mcp/endpoint.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveEverything, serveMcp, type UpstreamMcp } from "../helpers/upstream.js";

/**
 * server-everything (tools, resources, templates, prompts) registered by Alice's tenant; Bob
 * belongs to another tenant. Alice reaches it on its own endpoint with its own names, and its
 * resources and prompts through the catalog endpoint, namespaced; Bob never sees any of it.
 */
describe("MCP: one endpoint per upstream server, resources and prompts federated", () => {
  let server: TestServer;
  let everything: UpstreamMcp;
  let alice: string;
  let bob: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    everything = await serveEverything();
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    const registered = await server.request("/gateway/v1/mcp/servers", {
      method: "POST",
      headers: bearer(alice),
      json: { name: "everything", url: everything.url },
    });
    expect(registered.status).toBe(201);
    expect(registered.body.health).toBe("healthy");
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    expect(server.loggedErrors()).toEqual([]);
    await server.close();
    await everything.close();
  });

  async function connect(path: string, token: string): Promise<Client> {
    const client = new Client({ name: "test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url(path)), { requestInit: { headers: bearer(token) } }));
    clients.push(client);
    return client;
  }

  const post = (path: string, token: string, body: unknown, extra: Record<string, string> = {}) =>
    fetch(server.url(path), {
      method: "POST",
      headers: { ...bearer(token), "content-type": "application/json", accept: "application/json", ...extra },
      body: JSON.stringify(body),
    });

  describe("/bridge/mcp/servers/{name}/", () => {
    it("serves the owning tenant the server's tools with their original names, called through the catalog", async () => {
      const client = await connect("/bridge/mcp/servers/everything/", alice);
      const { tools } = await client.listTools();
      const names = tools.map((tool) => tool.name);
      expect(names).toEqual(expect.arrayContaining(["echo", "get-sum"]));
      expect(names.some((name) => name.includes("__"))).toBe(false);
      expect(names).not.toContain("calculator");

      const result = (await client.callTool({ name: "echo", arguments: { message: "hi there" } })) as CallToolResult;
      expect(result.isError).toBeFalsy();
      expect(JSON.stringify(result.content)).toContain("hi there");

      // The catalog's argument check runs before anything reaches the server.
      const bad = (await client.callTool({ name: "get-sum", arguments: { a: "one", b: 2 } })) as CallToolResult;
      expect(bad.isError).toBe(true);
      expect((bad.structuredContent as { error: { code: string } }).error.code).toBe("VALIDATION_FAILED");
      await expect(client.callTool({ name: "nope", arguments: {} })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown tool: nope"),
      });
      // The catalog's namespaced names are not this endpoint's.
      await expect(client.callTool({ name: "everything__echo", arguments: { message: "x" } })).rejects.toMatchObject({ code: -32602 });

      // Its resources and prompts, with their own names and URIs.
      expect(client.getServerCapabilities()).toMatchObject({ resources: {}, prompts: {} });
      const { prompts } = await client.listPrompts();
      expect(prompts.map((prompt) => prompt.name)).toContain("simple-prompt");
      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((template) => template.uriTemplate)).toContain("demo://resource/dynamic/text/{resourceId}");
      const read = await client.readResource({ uri: "demo://resource/dynamic/text/3" });
      expect(read.contents[0]).toMatchObject({ uri: "demo://resource/dynamic/text/3", text: expect.stringContaining("Resource 3") });
    });

    it("answers plain JSON-RPC statelessly, with and without the trailing slash", async () => {
      for (const path of ["/bridge/mcp/servers/everything/", "/bridge/mcp/servers/everything"]) {
        const list = await post(path, alice, { jsonrpc: "2.0", id: 1, method: "tools/list" });
        expect(list.status, path).toBe(200);
        expect(list.headers.get("mcp-session-id")).toBeNull();
        expect(((await list.json()) as any).result.tools.map((tool: { name: string }) => tool.name)).toContain("echo");
      }
      const call = await post("/bridge/mcp/servers/everything", alice, {
        jsonrpc: "2.0",
        id: 2,
        method: "tools/call",
        params: { name: "get-sum", arguments: { a: 2, b: 40 } },
      });
      expect(JSON.stringify(((await call.json()) as any).result.content)).toContain("42");
    });

    it("is the same 404 for another tenant's server and for one nobody registered, and holds the same gates", async () => {
      const body = { jsonrpc: "2.0", id: 1, method: "tools/list" };
      const foreign = await post("/bridge/mcp/servers/everything/", bob, body);
      const missing = await post("/bridge/mcp/servers/nobody/", bob, body);
      expect(foreign.status).toBe(404);
      expect(missing.status).toBe(404);
      const strip = (value: any) => ({
        ...value,
        error: {
          ...value.error,
          message: value.error.message.replace(/everything|nobody/, "X"),
          data: { ...value.error.data, requestId: "" },
        },
      });
      expect(strip(await foreign.json())).toEqual(strip(await missing.json()));
      const init = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      };
      expect((await post("/bridge/mcp/servers/everything/", bob, init)).status).toBe(404);
      // No credential: 401 before the server is looked at; a foreign Origin: 403.
      expect((await post("/bridge/mcp/servers/everything/", "not-a-token", body)).status).toBe(401);
    });

    it("keeps sessions apart from the catalog endpoint's", async () => {
      const init = {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "x", version: "1" } },
      };
      const opened = await post("/bridge/mcp/", alice, init);
      const sessionId = opened.headers.get("mcp-session-id")!;
      expect(sessionId).toBeTruthy();
      const elsewhere = await post(
        "/bridge/mcp/servers/everything/",
        alice,
        { jsonrpc: "2.0", id: 2, method: "tools/list" },
        { "mcp-session-id": sessionId, "mcp-protocol-version": "2025-11-25" },
      );
      expect(elsewhere.status).toBe(404);
    });
  });

  describe("resources and prompts on the catalog endpoint", () => {
    it("lists and reads the tenant's servers' resources and prompts, namespaced by server", async () => {
      const client = await connect("/bridge/mcp/", alice);
      expect(client.getServerCapabilities()).toMatchObject({ tools: { listChanged: true }, resources: {}, prompts: {} });

      const { resources } = await client.listResources();
      expect(resources.length).toBeGreaterThan(0);
      for (const resource of resources) {
        expect(resource.uri.startsWith("everything+demo://")).toBe(true);
        expect(resource._meta).toMatchObject({ server: "everything", uri: resource.uri.slice("everything+".length) });
      }
      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates.map((template) => template.uriTemplate)).toContain("everything+demo://resource/dynamic/text/{resourceId}");

      const read = await client.readResource({ uri: "everything+demo://resource/dynamic/text/2" });
      expect(read.contents[0]).toMatchObject({
        uri: "everything+demo://resource/dynamic/text/2",
        text: expect.stringContaining("Resource 2"),
      });
      await expect(client.readResource({ uri: "demo://resource/dynamic/text/2" })).rejects.toMatchObject({ code: -32002 });

      const { prompts } = await client.listPrompts();
      expect(prompts.map((prompt) => prompt.name)).toEqual(
        expect.arrayContaining(["everything__simple-prompt", "everything__args-prompt"]),
      );
      const weather = await client.getPrompt({ name: "everything__args-prompt", arguments: { city: "Lisbon" } });
      expect(JSON.stringify(weather.messages)).toContain("Lisbon");
      // Embedded resources come back under the namespaced URI, readable as such.
      const embedded = await client.getPrompt({
        name: "everything__resource-prompt",
        arguments: { resourceType: "Text", resourceId: "1" },
      });
      const resource = embedded.messages.map((message) => message.content).find((content) => content.type === "resource") as {
        resource: { uri: string };
      };
      expect(resource.resource.uri).toBe("everything+demo://resource/dynamic/text/1");
      await expect(client.getPrompt({ name: "nobody__simple-prompt" })).rejects.toMatchObject({ code: -32602 });
    });

    it("never shows another tenant's resources or prompts", async () => {
      const client = await connect("/bridge/mcp/", bob);
      const capabilities = client.getServerCapabilities();
      expect(capabilities?.resources).toBeUndefined();
      expect(capabilities?.prompts).toBeUndefined();
      const stateless = async (method: string, params: Record<string, unknown> = {}) =>
        (await (await post("/bridge/mcp/", bob, { jsonrpc: "2.0", id: 1, method, params })).json()) as any;
      expect((await stateless("resources/list")).error.code).toBe(-32601);
      expect((await stateless("resources/read", { uri: "everything+demo://resource/dynamic/text/1" })).error.code).toBe(-32601);
      expect((await stateless("prompts/get", { name: "everything__simple-prompt" })).error.code).toBe(-32601);
    });

    it("gives a tenant with its own server only that server's, and Alice's names resolve like unknown ones", async () => {
      const carol = (await registerUser(server)).token;
      expect(
        (
          await server.request("/gateway/v1/mcp/servers", {
            method: "POST",
            headers: bearer(carol),
            json: { name: "mine", url: everything.url },
          })
        ).status,
      ).toBe(201);
      const client = await connect("/bridge/mcp/", carol);
      expect(client.getServerCapabilities()).toMatchObject({ resources: {}, prompts: {} });
      const { resources } = await client.listResources();
      expect(resources.length).toBeGreaterThan(0);
      expect(resources.every((resource) => resource.uri.startsWith("mine+"))).toBe(true);
      const { prompts } = await client.listPrompts();
      expect(prompts.every((prompt) => prompt.name.startsWith("mine__"))).toBe(true);
      const foreign = client.readResource({ uri: "everything+demo://resource/dynamic/text/1" });
      await expect(foreign).rejects.toMatchObject({
        code: -32002,
        message: expect.stringContaining("Unknown resource: everything+demo://resource/dynamic/text/1"),
      });
      await expect(client.getPrompt({ name: "everything__simple-prompt" })).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown prompt: everything__simple-prompt"),
      });
      expect((await client.readResource({ uri: "mine+demo://resource/dynamic/text/1" })).contents[0]!.uri).toBe(
        "mine+demo://resource/dynamic/text/1",
      );
    });
  });

  describe("completion/complete", () => {
    it("completes a namespaced prompt argument and resource template variable from their server", async () => {
      const client = await connect("/bridge/mcp/", alice);
      expect(client.getServerCapabilities()?.completions).toEqual({});
      const departments = await client.complete({
        ref: { type: "ref/prompt", name: "everything__completable-prompt" },
        argument: { name: "department", value: "S" },
      });
      expect(departments.completion.values).toEqual(["Sales", "Support"]);
      // The context's arguments reach the server: the second argument depends on the first.
      const names = await client.complete({
        ref: { type: "ref/prompt", name: "everything__completable-prompt" },
        argument: { name: "name", value: "" },
        context: { arguments: { department: "Engineering" } },
      });
      expect(names.completion.values).toEqual(["Alice", "Bob", "Charlie"]);
      const ids = await client.complete({
        ref: { type: "ref/resource", uri: "everything+demo://resource/dynamic/text/{resourceId}" },
        argument: { name: "resourceId", value: "7" },
      });
      expect(ids.completion.values).toEqual(["7"]);
      // The server's own errors keep their code.
      await expect(
        client.complete({ ref: { type: "ref/prompt", name: "everything__no-such-prompt" }, argument: { name: "x", value: "" } }),
      ).rejects.toMatchObject({ code: -32602 });
      await expect(
        client.complete({ ref: { type: "ref/prompt", name: "completable-prompt" }, argument: { name: "department", value: "" } }),
      ).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown prompt: completable-prompt"),
      });
    });

    it("completes with the server's own names on its own endpoint, and statelessly", async () => {
      const client = await connect("/bridge/mcp/servers/everything/", alice);
      expect(client.getServerCapabilities()?.completions).toEqual({});
      const own = await client.complete({
        ref: { type: "ref/prompt", name: "completable-prompt" },
        argument: { name: "department", value: "M" },
      });
      expect(own.completion.values).toEqual(["Marketing"]);
      const stateless = await post("/bridge/mcp/", alice, {
        jsonrpc: "2.0",
        id: 1,
        method: "completion/complete",
        params: {
          ref: { type: "ref/resource", uri: "everything+demo://resource/dynamic/blob/{resourceId}" },
          argument: { name: "resourceId", value: "12" },
        },
      });
      expect(((await stateless.json()) as any).result.completion.values).toEqual(["12"]);
    });

    it("answers another tenant's refs like unknown ones, and declares nothing to a tenant without servers", async () => {
      const bobs = await connect("/bridge/mcp/", bob);
      expect(bobs.getServerCapabilities()?.completions).toBeUndefined();
      const stateless = await post("/bridge/mcp/", bob, {
        jsonrpc: "2.0",
        id: 1,
        method: "completion/complete",
        params: { ref: { type: "ref/prompt", name: "everything__completable-prompt" }, argument: { name: "department", value: "" } },
      });
      expect(((await stateless.json()) as any).error.code).toBe(-32601);

      const dave = (await registerUser(server)).token;
      expect(
        (
          await server.request("/gateway/v1/mcp/servers", {
            method: "POST",
            headers: bearer(dave),
            json: { name: "his", url: everything.url },
          })
        ).status,
      ).toBe(201);
      const client = await connect("/bridge/mcp/", dave);
      const foreign = client.complete({
        ref: { type: "ref/prompt", name: "everything__completable-prompt" },
        argument: { name: "department", value: "" },
      });
      const missing = client.complete({
        ref: { type: "ref/prompt", name: "nobody__completable-prompt" },
        argument: { name: "department", value: "" },
      });
      await expect(foreign).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown prompt: everything__completable-prompt"),
      });
      await expect(missing).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown prompt: nobody__completable-prompt"),
      });
      await expect(
        client.complete({
          ref: { type: "ref/resource", uri: "everything+demo://resource/dynamic/text/{resourceId}" },
          argument: { name: "resourceId", value: "1" },
        }),
      ).rejects.toMatchObject({
        code: -32602,
        message: expect.stringContaining("Unknown resource template: everything+demo://resource/dynamic/text/{resourceId}"),
      });
      expect(
        (
          await client.complete({
            ref: { type: "ref/prompt", name: "his__completable-prompt" },
            argument: { name: "department", value: "E" },
          })
        ).completion.values,
      ).toEqual(["Engineering"]);
    });
  });

  describe("resource subscriptions and list changes", () => {
    /** A session whose notifications are recorded, once its GET stream is open at the gateway. */
    async function listening(path: string, token: string): Promise<{ client: Client; updated: string[]; changed: string[] }> {
      const updated: string[] = [];
      const changed: string[] = [];
      const client = new Client({ name: "test", version: "1.0.0" });
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => void updated.push(notification.params.uri));
      client.setNotificationHandler(ResourceListChangedNotificationSchema, () => void changed.push("resources"));
      client.setNotificationHandler(PromptListChangedNotificationSchema, () => void changed.push("prompts"));
      const transport = new StreamableHTTPClientTransport(new URL(server.url(path)), { requestInit: { headers: bearer(token) } });
      await client.connect(transport);
      clients.push(client);
      await eventually(() => mcpSessionsOf(server.dispatcher.ports)!.get(transport.sessionId!)?.streamOpen === true);
      return { client, updated, changed };
    }

    it("relays a subscription to the server and its updates, renamed, to the sessions that subscribed only", async () => {
      const uri = "everything+demo://resource/dynamic/text/5";
      const subscriber = await listening("/bridge/mcp/", alice);
      const bystander = await listening("/bridge/mcp/", alice);
      const own = await listening("/bridge/mcp/servers/everything/", alice);
      expect(subscriber.client.getServerCapabilities()?.resources).toEqual({ subscribe: true, listChanged: true });
      await subscriber.client.subscribeResource({ uri });
      await own.client.subscribeResource({ uri: "demo://resource/dynamic/text/5" });
      // server-everything sends updates of subscribed URIs while this tool has it do so (at once, then every 5 s).
      await subscriber.client.callTool({ name: "everything__toggle-subscriber-updates", arguments: {} });
      try {
        await eventually(() => subscriber.updated.length > 0 && own.updated.length > 0);
        expect(subscriber.updated[0]).toBe(uri);
        expect(own.updated[0]).toBe("demo://resource/dynamic/text/5");
        expect(bystander.updated).toEqual([]);

        // Unsubscribed, a session hears nothing more; the other subscriber still does.
        await subscriber.client.unsubscribeResource({ uri });
        const heard = subscriber.updated.length;
        const ownHeard = own.updated.length;
        await subscriber.client.callTool({ name: "everything__toggle-subscriber-updates", arguments: {} });
        await subscriber.client.callTool({ name: "everything__toggle-subscriber-updates", arguments: {} });
        await eventually(() => own.updated.length > ownHeard);
        expect(subscriber.updated.length).toBe(heard);
      } finally {
        await subscriber.client.callTool({ name: "everything__toggle-subscriber-updates", arguments: {} });
      }
    });

    it("refuses subscriptions to another tenant's URIs like unknown ones, and without a session", async () => {
      const dave = (await registerUser(server)).token;
      expect(
        (
          await server.request("/gateway/v1/mcp/servers", {
            method: "POST",
            headers: bearer(dave),
            json: { name: "theirs", url: everything.url },
          })
        ).status,
      ).toBe(201);
      const { client } = await listening("/bridge/mcp/", dave);
      await expect(client.subscribeResource({ uri: "everything+demo://resource/dynamic/text/1" })).rejects.toMatchObject({
        code: -32002,
        message: expect.stringContaining("Unknown resource: everything+demo://resource/dynamic/text/1"),
      });
      await expect(client.subscribeResource({ uri: "nobody+demo://resource/dynamic/text/1" })).rejects.toMatchObject({ code: -32002 });
      const stateless = await post("/bridge/mcp/", alice, {
        jsonrpc: "2.0",
        id: 1,
        method: "resources/subscribe",
        params: { uri: "everything+demo://resource/dynamic/text/1" },
      });
      expect(((await stateless.json()) as any).error).toMatchObject({ code: -32600, message: expect.stringContaining("needs a session") });
    });

    it("relays a server's resources and prompts list_changed to the sessions that see it", async () => {
      const upstreams: McpServer[] = [];
      const changing = await serveMcp(() => {
        const mcp = new McpServer(
          { name: "changing", version: "1.0.0" },
          { capabilities: { resources: { listChanged: true }, prompts: { listChanged: true } } },
        );
        mcp.registerResource("note", "note://one", {}, async (uri) => ({ contents: [{ uri: uri.href, text: "one" }] }));
        mcp.registerPrompt("hello", {}, () => ({ messages: [{ role: "user", content: { type: "text", text: "hello" } }] }));
        mcp.registerTool("noop", {}, () => ({ content: [] }));
        upstreams.push(mcp);
        return mcp;
      });
      try {
        const erin = (await registerUser(server)).token;
        expect(
          (
            await server.request("/gateway/v1/mcp/servers", {
              method: "POST",
              headers: bearer(erin),
              json: { name: "changing", url: changing.url },
            })
          ).status,
        ).toBe(201);
        const erins = await listening("/bridge/mcp/", erin);
        const alices = await listening("/bridge/mcp/", alice);
        expect(erins.client.getServerCapabilities()?.prompts).toEqual({ listChanged: true });
        for (const mcp of upstreams) {
          mcp.sendResourceListChanged();
          mcp.sendPromptListChanged();
        }
        await eventually(() => erins.changed.includes("resources") && erins.changed.includes("prompts"));
        expect(alices.changed).toEqual([]);
      } finally {
        await changing.close();
      }
    });
  });

  describe("progress and cancellation of tools/call", () => {
    it("passes the client's progressToken on and relays the server's progress back to the client's request", async () => {
      const client = await connect("/bridge/mcp/", alice);
      const updates: { progress: number; total?: number }[] = [];
      const before = everything.requestBodies.length;
      const result = (await client.callTool(
        { name: "everything__trigger-long-running-operation", arguments: { duration: 0.3, steps: 3 } },
        undefined,
        {
          onprogress: (update) => void updates.push(update),
        },
      )) as CallToolResult;
      expect(JSON.stringify(result.content)).toContain("Long running operation completed");
      expect(updates).toEqual([
        { progress: 1, total: 3 },
        { progress: 2, total: 3 },
        { progress: 3, total: 3 },
      ]);
      // The upstream request carried a progressToken of the gateway's own.
      const sent = everything.requestBodies.slice(before).find((message: any) => message?.method === "tools/call") as any;
      expect(sent.params.name).toBe("trigger-long-running-operation");
      expect(sent.params._meta.progressToken).toBeDefined();
    });

    it("relays progress on a server's own endpoint too", async () => {
      const client = await connect("/bridge/mcp/servers/everything/", alice);
      const updates: number[] = [];
      await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.2, steps: 2 } }, undefined, {
        onprogress: ({ progress }) => void updates.push(progress),
      });
      expect(updates).toEqual([1, 2]);
    });

    it("answers a plain JSON-RPC call asking for progress with an SSE stream when the client accepts one", async () => {
      const body = {
        jsonrpc: "2.0",
        id: 7,
        method: "tools/call",
        params: {
          name: "everything__trigger-long-running-operation",
          arguments: { duration: 0.2, steps: 2 },
          _meta: { progressToken: "p-1" },
        },
      };
      const streamed = await post("/bridge/mcp/", alice, body, { accept: "application/json, text/event-stream" });
      expect(streamed.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const events = (await streamed.text())
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)));
      expect(events.map((event) => event.method ?? "reply")).toEqual(["notifications/progress", "notifications/progress", "reply"]);
      expect(events[1].params).toEqual({ progressToken: "p-1", progress: 2, total: 2 });
      expect(events[2]).toMatchObject({ id: 7, result: { content: [{ type: "text", text: expect.stringContaining("completed") }] } });
      // A client that accepts JSON only gets the reply alone.
      const plain = await post("/bridge/mcp/", alice, body);
      expect(plain.headers.get("content-type")).toMatch(/^application\/json/);
      expect(((await plain.json()) as any).result.content[0].text).toContain("completed");
    });

    it("cancels the upstream call when the client cancels its request", async () => {
      const client = await connect("/bridge/mcp/", alice);
      const before = everything.requestBodies.length;
      const controller = new AbortController();
      const pending = client.callTool(
        { name: "everything__trigger-long-running-operation", arguments: { duration: 5, steps: 5 } },
        undefined,
        { signal: controller.signal },
      );
      await eventually(() => everything.requestBodies.slice(before).some((message: any) => message?.method === "tools/call"));
      controller.abort("changed my mind");
      await expect(pending).rejects.toThrow();
      const upstreamCall = everything.requestBodies.slice(before).find((message: any) => message?.method === "tools/call") as any;
      await eventually(() =>
        everything.requestBodies
          .slice(before)
          .some((message: any) => message?.method === "notifications/cancelled" && message.params.requestId === upstreamCall.id),
      );
    });
  });
});

async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 8000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
