import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  type CallToolResult,
} from "@modelcontextprotocol/sdk/types.js";
import { mcpSessionsOf } from "../../bridge/mcp/endpoint.js";
import { VmAgent, type LocalPrompt, type LocalResource } from "../../bridge/vm/agent/client.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { serveEverything, type UpstreamMcp } from "../helpers/upstream.js";
import { connectVm, vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

/** What a VM agent was asked, by method. */
type Asked = { method: string; params: unknown }[];

function agentFor(server: TestServer, token: string, vmId: string, asked: Asked): VmAgent {
  const resources: LocalResource[] = [
    {
      uri: "file:///notes.txt",
      name: "notes",
      mimeType: "text/plain",
      read: async () => {
        asked.push({ method: "resources/read", params: "file:///notes.txt" });
        return { contents: [{ uri: "file:///notes.txt", mimeType: "text/plain", text: `notes of ${vmId}` }] };
      },
    },
  ];
  const prompts: LocalPrompt[] = [
    {
      name: "summarize",
      description: "Summarize a file",
      arguments: [{ name: "path", required: true }],
      get: async (args) => {
        asked.push({ method: "prompts/get", params: args });
        return {
          messages: [
            { role: "user", content: { type: "text", text: `Summarize ${args.path} on ${vmId}` } },
            { role: "user", content: { type: "resource_link", uri: "file:///notes.txt", name: "notes" } },
          ],
        };
      },
    },
  ];
  return new VmAgent({
    url: vmSocketUrl(server.origin, "agent", { vmId }),
    key: token,
    log: () => undefined,
    resources,
    prompts,
    tools: [
      {
        name: "whoami",
        description: "Names the VM",
        category: "test",
        inputSchema: { type: "object" },
        run: async () => {
          asked.push({ method: "tools/call", params: "whoami" });
          return { content: [{ type: "text", text: vmId }] };
        },
      },
    ],
  });
}

/**
 * The full peer matrix: server-everything as Alice's upstream, the repo's VM agent with tools,
 * resources and prompts for each of two tenants, and the SDK Client (with sampling and
 * elicitation handlers) as each tenant's client. Each side's view is asserted.
 */
describe("MCP peer matrix: server-everything upstream, VM agents, SDK clients of two tenants", () => {
  let server: TestServer;
  let everything: UpstreamMcp;
  let alice: string;
  let bob: string;
  const aliceAsked: Asked = [];
  const bobAsked: Asked = [];
  const agents: { agent: VmAgent; running: Promise<void> }[] = [];
  const clients: Client[] = [];
  const sampled: string[] = [];
  const elicited: string[] = [];

  async function client(token: string): Promise<Client> {
    const mcp = new Client({ name: "matrix", version: "1.0.0" }, { capabilities: { sampling: {}, elicitation: { form: {} } } });
    mcp.setRequestHandler(CreateMessageRequestSchema, (request) => {
      sampled.push(JSON.stringify(request.params.messages));
      return { role: "assistant", model: "matrix-model", content: { type: "text", text: "sampled by the client" } };
    });
    mcp.setRequestHandler(ElicitRequestSchema, (request) => {
      elicited.push(request.params.message);
      return { action: "decline" };
    });
    await mcp.connect(new StreamableHTTPClientTransport(new URL(server.url("/bridge/mcp/")), { requestInit: { headers: bearer(token) } }));
    clients.push(mcp);
    return mcp;
  }

  beforeAll(async () => {
    everything = await serveEverything();
    server = await startTestServer({ MCP_SERVERS_ALLOW_PRIVATE: "true", GATEWAY_RATE_LIMIT_RPM: "10000" });
    alice = (await registerUser(server)).token;
    bob = (await registerUser(server)).token;
    expect(
      (
        await server.request("/gateway/v1/mcp/servers", {
          method: "POST",
          headers: bearer(alice),
          json: { name: "everything", url: everything.url },
        })
      ).body.health,
    ).toBe("healthy");
    for (const [token, vmId, asked] of [
      [alice, "alice-vm", aliceAsked],
      [bob, "bob-vm", bobAsked],
    ] as const) {
      const agent = agentFor(server, token, vmId, asked);
      agents.push({ agent, running: agent.run() });
    }
    await eventually(async () => (await server.bridge.vms.list()).filter((record) => record.resources?.length).length === 2);
  });
  afterAll(async () => {
    await Promise.all(clients.map((mcp) => mcp.close().catch(() => undefined)));
    for (const { agent, running } of agents) {
      agent.stop();
      await running;
    }
    await server.close();
    await everything.close();
  });

  it("gives Alice's client everything's and her VM's resources, prompts, completions, tools, progress, sampling and elicitation", async () => {
    const mcp = await client(alice);
    expect(mcp.getServerCapabilities()).toMatchObject({
      tools: {},
      logging: {},
      resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true },
      completions: {},
    });

    const { resources } = await mcp.listResources();
    const uris = resources.map((resource) => resource.uri);
    expect(uris).toContain("vm+alice-vm+file:///notes.txt");
    expect(uris.some((uri) => uri.startsWith("everything+demo://"))).toBe(true);
    expect(uris.some((uri) => uri.includes("bob-vm"))).toBe(false);
    expect(resources.find((resource) => resource.uri === "vm+alice-vm+file:///notes.txt")).toMatchObject({
      name: "notes",
      mimeType: "text/plain",
      _meta: { vm: "alice-vm", uri: "file:///notes.txt" },
    });
    const { resourceTemplates } = await mcp.listResourceTemplates();
    expect(resourceTemplates.map((template) => template.uriTemplate)).toContain("everything+demo://resource/dynamic/text/{resourceId}");

    // The VM is asked with its own URI; the answer comes back namespaced.
    const read = await mcp.readResource({ uri: "vm+alice-vm+file:///notes.txt" });
    expect(read.contents).toEqual([{ uri: "vm+alice-vm+file:///notes.txt", mimeType: "text/plain", text: "notes of alice-vm" }]);
    expect(aliceAsked).toContainEqual({ method: "resources/read", params: "file:///notes.txt" });
    const upstreamRead = await mcp.readResource({ uri: "everything+demo://resource/dynamic/text/2" });
    expect(upstreamRead.contents[0]!.uri).toBe("everything+demo://resource/dynamic/text/2");

    const { prompts } = await mcp.listPrompts();
    const names = prompts.map((prompt) => prompt.name);
    expect(names).toEqual(expect.arrayContaining(["everything__simple-prompt", "vm__alice-vm__summarize"]));
    expect(names.some((name) => name.includes("bob-vm"))).toBe(false);
    const prompt = await mcp.getPrompt({ name: "vm__alice-vm__summarize", arguments: { path: "/etc/motd" } });
    expect(prompt.messages[0]!.content).toEqual({ type: "text", text: "Summarize /etc/motd on alice-vm" });
    // A resource link in a VM's prompt is namespaced, so it can be read again.
    expect(prompt.messages[1]!.content).toMatchObject({ type: "resource_link", uri: "vm+alice-vm+file:///notes.txt" });
    expect(aliceAsked).toContainEqual({ method: "prompts/get", params: { path: "/etc/motd" } });

    const completed = await mcp.complete({
      ref: { type: "ref/prompt", name: "everything__completable-prompt" },
      argument: { name: "department", value: "Eng" },
    });
    expect(completed.completion.values).toContain("Engineering");

    // Tools: the upstream's and the VM's, progress relayed, sampling and elicitation answered by this client.
    expect(((await mcp.callTool({ name: "vm__alice-vm__whoami", arguments: {} })) as CallToolResult).content).toEqual([
      { type: "text", text: "alice-vm" },
    ]);
    const progress: number[] = [];
    await mcp.callTool({ name: "everything__trigger-long-running-operation", arguments: { duration: 0.2, steps: 2 } }, undefined, {
      onprogress: (update) => void progress.push(update.progress),
    });
    expect(progress).toEqual([1, 2]);
    const sampling = (await mcp.callTool({
      name: "everything__trigger-sampling-request",
      arguments: { prompt: "matrix" },
    })) as CallToolResult;
    expect(JSON.stringify(sampling.content)).toContain("sampled by the client");
    expect(sampled.at(-1)).toContain("matrix");
    const elicitation = (await mcp.callTool({ name: "everything__trigger-elicitation-request", arguments: {} })) as CallToolResult;
    expect(elicited.at(-1)).toBe("Please provide inputs for the following fields:");
    expect(JSON.stringify(elicitation.content)).toMatch(/decline/i);
  });

  it("hides Alice's server and VM from Bob: the same -32002/-32602 answers as names nobody has, and Alice's VM is never asked", async () => {
    const mcp = await client(bob);
    const before = aliceAsked.length;
    const { resources } = await mcp.listResources();
    expect(resources.map((resource) => resource.uri)).toEqual(["vm+bob-vm+file:///notes.txt"]);
    expect((await mcp.listPrompts()).prompts.map((prompt) => prompt.name)).toEqual(["vm__bob-vm__summarize"]);
    expect((await mcp.readResource({ uri: "vm+bob-vm+file:///notes.txt" })).contents[0]).toMatchObject({ text: "notes of bob-vm" });

    const failure = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: Error & { code: number }) => ({ code: error.code, message: error.message }),
      );
    const theirs = await failure(mcp.readResource({ uri: "vm+alice-vm+file:///notes.txt" }));
    const missing = await failure(mcp.readResource({ uri: "vm+nobody+file:///notes.txt" }));
    expect(theirs?.code).toBe(-32002);
    expect(theirs?.message.replace("alice-vm", "nobody")).toBe(missing?.message);
    const theirPrompt = await failure(mcp.getPrompt({ name: "vm__alice-vm__summarize", arguments: { path: "x" } }));
    const missingPrompt = await failure(mcp.getPrompt({ name: "vm__nobody__summarize", arguments: { path: "x" } }));
    expect(theirPrompt?.code).toBe(-32602);
    expect(theirPrompt?.message.replace("alice-vm", "nobody")).toBe(missingPrompt?.message);
    const theirServer = await failure(mcp.readResource({ uri: "everything+demo://resource/dynamic/text/2" }));
    expect(theirServer?.code).toBe(-32002);
    // A URI Bob's own VM never announced is unknown too, and the VM is not asked.
    expect((await failure(mcp.readResource({ uri: "vm+bob-vm+file:///etc/passwd" })))?.code).toBe(-32002);
    expect(bobAsked.filter((entry) => entry.method === "resources/read")).toHaveLength(1);
    expect(aliceAsked.length).toBe(before);
  });

  it("tells the owning tenant's sessions, and only them, when a VM's resources and prompts come and go", async () => {
    const aliceClient = await client(alice);
    const bobClient = await client(bob);
    const heard = { alice: [] as string[], bob: [] as string[] };
    for (const [mcp, into] of [
      [aliceClient, heard.alice],
      [bobClient, heard.bob],
    ] as const) {
      mcp.setNotificationHandler(ResourceListChangedNotificationSchema, () => void into.push("resources"));
      mcp.setNotificationHandler(PromptListChangedNotificationSchema, () => void into.push("prompts"));
    }
    // Both GET streams are held before the catalog changes.
    const sessions = mcpSessionsOf(server.dispatcher.ports)!;
    await eventually(() => [aliceClient, bobClient].every((mcp) => sessions.get(mcp.transport!.sessionId!)?.streamOpen === true));
    const asked: Asked = [];
    const extra = agentFor(server, alice, "alice-vm-2", asked);
    const running = extra.run();
    try {
      await eventually(() => heard.alice.includes("resources") && heard.alice.includes("prompts"));
      expect((await aliceClient.listResources()).resources.map((resource) => resource.uri)).toContain("vm+alice-vm-2+file:///notes.txt");
    } finally {
      extra.stop();
      await running;
    }
    await eventually(
      async () => !(await aliceClient.listResources()).resources.some((resource) => resource.uri.startsWith("vm+alice-vm-2+")),
    );
    expect(heard.bob).toEqual([]);
  });

  it("refuses a registration whose resources or prompts break the protocol's bounds, with -32602 saying which", async () => {
    const vm = await connectVm(vmSocketUrl(server.origin, "agent", { vmId: "bad-vm" }), alice);
    try {
      const refused = (params: Record<string, unknown>) =>
        vm.rpc.requestAdvanced({ jsonrpc: "2.0", id: Math.random(), method: "tools/register", params: { tools: [], ...params } });
      const badUri = await refused({ resources: [{ uri: "not a uri", name: "x" }] });
      expect(badUri.error).toMatchObject({ code: -32602, message: expect.stringContaining("uri must be an absolute URI") });
      const twice = await refused({ prompts: [{ name: "p" }, { name: "p" }] });
      expect(twice.error).toMatchObject({ code: -32602, message: expect.stringContaining("prompt names must be unique") });
      expect((await server.bridge.vms.find("bad-vm"))?.resources).toBeUndefined();
    } finally {
      await vm.close();
    }
  });
});
