import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import {
  CallToolRequestSchema,
  CreateMessageRequestSchema,
  CreateMessageResultSchema,
  ElicitRequestSchema,
  ElicitResultSchema,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  type CallToolResult,
  type ClientCapabilities,
  type CreateMessageRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveEverything, serveMcp, type UpstreamMcp } from "../helpers/upstream.js";
import { eventually } from "../helpers/eventually.js";

/**
 * An upstream whose tools ask the client during the call, as related requests: `ask` samples
 * the prompt it is given, `where` lists the client's roots, `confirm` elicits a yes/no.
 */
function askingUpstream(): Promise<UpstreamMcp> {
  return serveMcp(() => {
    const server = new Server({ name: "asker", version: "1.0.0" }, { capabilities: { tools: {} } });
    const object = { type: "object" as const, properties: { prompt: { type: "string" } } };
    server.setRequestHandler(ListToolsRequestSchema, () => ({
      tools: [
        { name: "ask", description: "Samples the prompt", inputSchema: object },
        { name: "where", description: "Lists the client's roots", inputSchema: { type: "object" as const } },
        { name: "confirm", description: "Asks the user", inputSchema: { type: "object" as const } },
      ],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const args = (request.params.arguments ?? {}) as { prompt?: string };
      try {
        if (request.params.name === "ask") {
          const sampled = await extra.sendRequest(
            {
              method: "sampling/createMessage",
              params: { messages: [{ role: "user", content: { type: "text", text: args.prompt ?? "" } }], maxTokens: 10 },
            },
            CreateMessageResultSchema,
          );
          return { content: [{ type: "text", text: `sampled: ${(sampled.content as { text: string }).text}` }] };
        }
        if (request.params.name === "where") {
          const { roots } = await extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema);
          return { content: [{ type: "text", text: roots.map((root) => root.uri).join(",") }] };
        }
        const answer = await extra.sendRequest(
          {
            method: "elicitation/create",
            params: { message: "Proceed?", requestedSchema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] } },
          },
          ElicitResultSchema,
        );
        return { content: [{ type: "text", text: JSON.stringify(answer) }] };
      } catch (error) {
        return { content: [{ type: "text", text: `refused: ${(error as Error).message}` }], isError: true };
      }
    });
    return server;
  });
}

describe("MCP: an upstream server's requests during a call are relayed to the client that made it", () => {
  let server: TestServer;
  let everything: UpstreamMcp;
  let asker: UpstreamMcp;
  let alice: string;
  let bob: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    everything = await serveEverything();
    asker = await askingUpstream();
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    for (const [name, url] of [
      ["everything", everything.url],
      ["asker", asker.url],
    ]) {
      const registered = await server.request("/gateway/v1/mcp/servers", { method: "POST", headers: bearer(alice), json: { name, url } });
      expect(registered.body.health).toBe("healthy");
    }
  });
  afterAll(async () => {
    await Promise.all(clients.map((client) => client.close().catch(() => undefined)));
    await server.close();
    await everything.close();
    await asker.close();
  });

  async function connect(token: string, capabilities: ClientCapabilities = {}, path = "/bridge/mcp/"): Promise<Client> {
    const client = new Client({ name: "test", version: "1.0.0" }, { capabilities });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url(path)), { requestInit: { headers: bearer(token) } }));
    clients.push(client);
    return client;
  }

  const text = (result: unknown) => ((result as CallToolResult).content[0] as { text: string }).text;

  it("relays server-everything's sampling request to the client's sampling handler and its answer back", async () => {
    const client = await connect(alice, { sampling: {} });
    const received: CreateMessageRequest["params"][] = [];
    client.setRequestHandler(CreateMessageRequestSchema, (request) => {
      received.push(request.params);
      return { role: "assistant", model: "test-model", content: { type: "text", text: "forty-two" } };
    });
    const result = await client.callTool({
      name: "everything__trigger-sampling-request",
      arguments: { prompt: "meaning of life", maxTokens: 12 },
    });
    expect((result as CallToolResult).isError).toBeFalsy();
    expect(text(result)).toContain("forty-two");
    expect(text(result)).toContain("test-model");
    expect(received).toHaveLength(1);
    expect(received[0]!.maxTokens).toBe(12);
    expect(JSON.stringify(received[0]!.messages)).toContain("meaning of life");
  });

  it("relays server-everything's elicitation request to the client's elicitation handler, on the server's own endpoint too", async () => {
    for (const [path, tool] of [
      ["/bridge/mcp/", "everything__trigger-elicitation-request"],
      ["/bridge/mcp/servers/everything/", "trigger-elicitation-request"],
    ] as const) {
      const client = await connect(alice, { elicitation: { form: {} } }, path);
      const asked: string[] = [];
      client.setRequestHandler(ElicitRequestSchema, (request) => {
        asked.push(request.params.message);
        return { action: "accept", content: { name: "Ada Lovelace", check: true } };
      });
      const result = await client.callTool({ name: tool, arguments: {} });
      expect(asked).toEqual(["Please provide inputs for the following fields:"]);
      expect(JSON.stringify((result as CallToolResult).content)).toContain("Ada Lovelace");
    }
  });

  it("relays roots/list and elicitation of a related request, and routes each session's request to that session when calls overlap", async () => {
    const make = async (who: string) => {
      const client = await connect(alice, { sampling: {}, roots: {}, elicitation: {} });
      const prompts: string[] = [];
      client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
        prompts.push((request.params.messages[0]!.content as { text: string }).text);
        // Both calls are in flight before either answers.
        await new Promise((resolve) => setTimeout(resolve, 150));
        return { role: "assistant", model: who, content: { type: "text", text: `${who} answers` } };
      });
      client.setRequestHandler(ListRootsRequestSchema, () => ({ roots: [{ uri: `file:///home/${who}`, name: who }] }));
      client.setRequestHandler(ElicitRequestSchema, () => ({ action: "accept", content: { ok: who === "one" } }));
      return { client, prompts };
    };
    const [one, two] = await Promise.all([make("one"), make("two")]);
    const [a, b] = await Promise.all([
      one.client.callTool({ name: "asker__ask", arguments: { prompt: "from one" } }),
      two.client.callTool({ name: "asker__ask", arguments: { prompt: "from two" } }),
    ]);
    expect(text(a)).toBe("sampled: one answers");
    expect(text(b)).toBe("sampled: two answers");
    expect(one.prompts).toEqual(["from one"]);
    expect(two.prompts).toEqual(["from two"]);
    expect(text(await two.client.callTool({ name: "asker__where", arguments: {} }))).toBe("file:///home/two");
    expect(JSON.parse(text(await one.client.callTool({ name: "asker__confirm", arguments: {} })))).toEqual({
      action: "accept",
      content: { ok: true },
    });
  });

  it("refuses with -32601 when the client did not declare the capability, and in plain JSON-RPC", async () => {
    const client = await connect(alice, { sampling: {} });
    client.setRequestHandler(CreateMessageRequestSchema, () => ({ role: "assistant", model: "m", content: { type: "text", text: "x" } }));
    const roots = (await client.callTool({ name: "asker__where", arguments: {} })) as CallToolResult;
    expect(roots.isError).toBe(true);
    // The client has an upstream session of its own, which declares what the client declared
    // (no roots): the server's roots/list is answered -32601 as the client itself would.
    expect(text(roots)).toMatch(/-32601: Method not found/);

    const plain = await fetch(server.url("/bridge/mcp/"), {
      method: "POST",
      headers: { ...bearer(alice), "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "asker__ask", arguments: { prompt: "hi" } } }),
    });
    const body = (await plain.json()) as { result: CallToolResult };
    expect(body.result.isError).toBe(true);
    expect(text(body.result)).toContain(
      "sampling/createMessage cannot be relayed: the tools/call came as plain JSON-RPC without an MCP session",
    );
  });

  it("sends the request on the session's GET stream when the client accepts JSON only on its call", async () => {
    const client = await connect(alice, { sampling: {} });
    client.setRequestHandler(CreateMessageRequestSchema, () => ({
      role: "assistant",
      model: "m",
      content: { type: "text", text: "over the GET stream" },
    }));
    const transport = (client as unknown as { transport: StreamableHTTPClientTransport }).transport;
    // The SDK client opens its GET stream after initialize; wait until the bridge holds it.
    await eventually(async () => {
      const res = await fetch(server.url("/bridge/mcp/"), {
        method: "POST",
        headers: {
          ...bearer(alice),
          "content-type": "application/json",
          accept: "application/json",
          "mcp-session-id": transport.sessionId!,
          "mcp-protocol-version": transport.protocolVersion!,
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/call", params: { name: "asker__ask", arguments: { prompt: "p" } } }),
      });
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      return text(((await res.json()) as { result: CallToolResult }).result) === "sampled: over the GET stream";
    });
  });

  it("never reaches another tenant's server: Bob's sampling client is never asked, his call is the same -32602 as a missing tool", async () => {
    const client = await connect(bob, { sampling: {} });
    let asked = 0;
    client.setRequestHandler(CreateMessageRequestSchema, () => {
      asked += 1;
      return { role: "assistant", model: "m", content: { type: "text", text: "x" } };
    });
    const theirs = await client
      .callTool({ name: "asker__ask", arguments: { prompt: "hi" } })
      .catch((error: Error & { code: number }) => error);
    const missing = await client
      .callTool({ name: "nobody__ask", arguments: { prompt: "hi" } })
      .catch((error: Error & { code: number }) => error);
    expect((theirs as { code: number }).code).toBe(-32602);
    expect((theirs as Error).message.replace("asker", "nobody")).toBe((missing as Error).message);
    expect(asked).toBe(0);
  });
});
