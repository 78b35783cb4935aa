import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport, type EventStore } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ErrorCode,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  type CallToolResult,
  type JSONRPCMessage,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";

/** A 1×1 PNG and a tiny WAV, as base64. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
const WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

const empty = { type: "object" as const, properties: {} };
const text = (value: string): CallToolResult => ({ content: [{ type: "text", text: value }] });

/**
 * The tools, resources and prompts the server scenarios of `@modelcontextprotocol/conformance`
 * 0.1.16 call by name (`conformance list --server`), plus a tool with an output schema and
 * structured content: a real MCP server (SDK, loopback) to run the suite against directly and
 * through the gateway's per-server endpoint (test/bridge/mcp-conformance.test.ts).
 */
const TOOLS: Tool[] = [
  { name: "test_simple_text", description: "Simple text content", inputSchema: empty },
  { name: "test_image_content", description: "Image content", inputSchema: empty },
  { name: "test_audio_content", description: "Audio content", inputSchema: empty },
  { name: "test_embedded_resource", description: "Embedded resource content", inputSchema: empty },
  { name: "test_multiple_content_types", description: "Text, image and resource content", inputSchema: empty },
  { name: "test_tool_with_logging", description: "Logs while it runs", inputSchema: empty },
  { name: "test_tool_with_progress", description: "Reports progress", inputSchema: empty },
  { name: "test_error_handling", description: "Answers with an error", inputSchema: empty },
  { name: "test_reconnection", description: "Closes its SSE answer mid-call (SEP-1699)", inputSchema: empty },
  {
    name: "test_sampling",
    description: "Asks the client for a completion",
    inputSchema: { type: "object", properties: { prompt: { type: "string" } }, required: ["prompt"] },
  },
  {
    name: "test_elicitation",
    description: "Asks the user",
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  },
  { name: "test_elicitation_sep1034_defaults", description: "Elicitation with defaults (SEP-1034)", inputSchema: empty },
  { name: "test_elicitation_sep1330_enums", description: "Elicitation with enums (SEP-1330)", inputSchema: empty },
  {
    name: "json_schema_2020_12_tool",
    description: "JSON Schema 2020-12 input (SEP-1613)",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      $defs: { address: { type: "object", properties: { street: { type: "string" }, city: { type: "string" } } } },
      properties: { name: { type: "string" }, address: { $ref: "#/$defs/address" } },
      additionalProperties: false,
    },
  },
  {
    name: "test_structured",
    description: "Structured content with an output schema",
    inputSchema: { type: "object", properties: { n: { type: "number" } } },
    outputSchema: { type: "object", properties: { doubled: { type: "number" } }, required: ["doubled"] },
    _meta: { "example.com/kind": "structured" },
  },
];

const ELICIT_DEFAULTS = {
  type: "object",
  properties: {
    name: { type: "string", description: "User name", default: "John Doe" },
    age: { type: "integer", description: "User age", default: 30 },
    score: { type: "number", description: "User score", default: 95.5 },
    status: { type: "string", description: "User status", enum: ["active", "inactive", "pending"], default: "active" },
    verified: { type: "boolean", description: "Verification status", default: true },
  },
  required: [],
};

const ELICIT_ENUMS = {
  type: "object",
  properties: {
    untitledSingle: { type: "string", description: "Select one option", enum: ["option1", "option2", "option3"] },
    titledSingle: {
      type: "string",
      description: "Select one option with titles",
      oneOf: [
        { const: "value1", title: "First Option" },
        { const: "value2", title: "Second Option" },
        { const: "value3", title: "Third Option" },
      ],
    },
    legacyEnum: {
      type: "string",
      description: "Select one option (legacy)",
      enum: ["opt1", "opt2", "opt3"],
      enumNames: ["Option One", "Option Two", "Option Three"],
    },
    untitledMulti: {
      type: "array",
      description: "Select multiple options",
      minItems: 1,
      maxItems: 3,
      items: { type: "string", enum: ["option1", "option2", "option3"] },
    },
    titledMulti: {
      type: "array",
      description: "Select multiple options with titles",
      minItems: 1,
      maxItems: 3,
      items: {
        anyOf: [
          { const: "value1", title: "First Choice" },
          { const: "value2", title: "Second Choice" },
          { const: "value3", title: "Third Choice" },
        ],
      },
    },
  },
  required: [],
};

const RESOURCES = [
  { uri: "test://static-text", name: "static-text", title: "Static Text Resource", mimeType: "text/plain" },
  { uri: "test://static-binary", name: "static-binary", title: "Static Binary Resource", mimeType: "image/png" },
  { uri: "test://watched-resource", name: "watched-resource", title: "Watched Resource", mimeType: "text/plain" },
];

const PROMPTS = [
  { name: "test_simple_prompt", title: "Simple Test Prompt", description: "A prompt without arguments" },
  {
    name: "test_prompt_with_arguments",
    title: "Prompt With Arguments",
    description: "A prompt with required arguments",
    arguments: [
      { name: "arg1", description: "First test argument", required: true },
      { name: "arg2", description: "Second test argument", required: true },
    ],
  },
  {
    name: "test_prompt_with_embedded_resource",
    title: "Prompt With Embedded Resource",
    description: "A prompt that includes an embedded resource",
    arguments: [{ name: "resourceUri", description: "URI of the resource to embed", required: true }],
  },
  { name: "test_prompt_with_image", title: "Prompt With Image", description: "A prompt that includes image content" },
];

/** One SDK server per session, as the SDK's examples run it. */
function conformanceServer(transportOf: () => StreamableHTTPServerTransport | undefined): Server {
  const server = new Server(
    { name: "conformance-upstream", version: "1.0.0" },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
    },
  );
  const log = (data: string) =>
    void server
      .notification({ method: "notifications/message", params: { level: "info", logger: "conformance-upstream", data } })
      .catch(() => undefined);
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case "test_simple_text":
        return text("This is a simple text response for testing.");
      case "test_image_content":
        return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
      case "test_audio_content":
        return { content: [{ type: "audio", data: WAV, mimeType: "audio/wav" }] };
      case "test_embedded_resource":
        return {
          content: [
            {
              type: "resource",
              resource: { uri: "test://embedded-resource", mimeType: "text/plain", text: "This is an embedded resource content." },
            },
          ],
        };
      case "test_multiple_content_types":
        return {
          content: [
            { type: "text", text: "Multiple content types test:" },
            { type: "image", data: PNG, mimeType: "image/png" },
            {
              type: "resource",
              resource: {
                uri: "test://mixed-content-resource",
                mimeType: "application/json",
                text: JSON.stringify({ test: "data", value: 123 }),
              },
            },
          ],
        };
      case "test_tool_with_logging":
        for (const [index, data] of ["Tool execution started", "Tool processing data", "Tool execution completed"].entries()) {
          if (index > 0) await sleep(50);
          await extra.sendNotification({ method: "notifications/message", params: { level: "info", data } });
        }
        return text("Tool with logging executed successfully");
      case "test_tool_with_progress": {
        const progressToken = request.params._meta?.progressToken ?? 0;
        for (const progress of [0, 50, 100]) {
          if (progress > 0) await sleep(50);
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, total: 100, message: `Completed step ${progress} of 100` },
          });
        }
        return text(String(progressToken));
      }
      case "test_error_handling":
        return { content: [{ type: "text", text: "This tool intentionally returns an error for testing" }], isError: true };
      case "test_reconnection":
        transportOf()?.closeSSEStream(extra.requestId);
        await sleep(100);
        return text(
          "Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.",
        );
      case "test_sampling":
        try {
          // Not tied to the call: on the session's GET stream, as many servers send it.
          const sampled = await server.request(
            {
              method: "sampling/createMessage",
              params: { messages: [{ role: "user", content: { type: "text", text: String(args.prompt ?? "") } }], maxTokens: 100 },
            },
            CreateMessageResultSchema,
          );
          return text(`LLM response: ${(sampled.content as { text?: string }).text ?? "No response"}`);
        } catch (error) {
          return text(`Sampling not supported or error: ${(error as Error).message}`);
        }
      case "test_elicitation":
      case "test_elicitation_sep1034_defaults":
      case "test_elicitation_sep1330_enums": {
        const requestedSchema =
          request.params.name === "test_elicitation"
            ? { type: "object", properties: { response: { type: "string", description: "User's response" } }, required: ["response"] }
            : request.params.name === "test_elicitation_sep1034_defaults"
              ? ELICIT_DEFAULTS
              : ELICIT_ENUMS;
        const message = request.params.name === "test_elicitation" ? String(args.message ?? "") : "Please fill in the form";
        try {
          const answer = await server.request(
            { method: "elicitation/create", params: { mode: "form", message, requestedSchema } } as never,
            ElicitResultSchema,
          );
          return text(`User response: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
        } catch (error) {
          return text(`Elicitation not supported or error: ${(error as Error).message}`);
        }
      }
      case "json_schema_2020_12_tool":
        return text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`);
      case "test_structured": {
        const doubled = Number(args.n ?? 0) * 2;
        return {
          content: [{ type: "text", text: JSON.stringify({ doubled }) }],
          structuredContent: { doubled },
          _meta: { "example.com/trace": "t-1" },
        };
      }
    }
    throw new McpError(ErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({ resources: RESOURCES }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [
      { uriTemplate: "test://template/{id}/data", name: "template", title: "Resource Template", mimeType: "application/json" },
    ],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    const { uri } = request.params;
    if (uri === "test://static-text")
      return { contents: [{ uri, mimeType: "text/plain", text: "This is the content of the static text resource." }] };
    if (uri === "test://static-binary") return { contents: [{ uri, mimeType: "image/png", blob: PNG }] };
    if (uri === "test://watched-resource") return { contents: [{ uri, mimeType: "text/plain", text: "Watched resource content" }] };
    const match = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
    if (match)
      return {
        contents: [
          {
            uri,
            mimeType: "application/json",
            text: JSON.stringify({ id: match[1], templateTest: true, data: `Data for ID: ${match[1]}` }),
          },
        ],
      };
    throw new McpError(-32002, `Resource not found: ${uri}`);
  });
  server.setRequestHandler(SubscribeRequestSchema, (request) => {
    log(`Subscribed to resource: ${request.params.uri}`);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    log(`Unsubscribed from resource: ${request.params.uri}`);
    return {};
  });

  server.setRequestHandler(ListPromptsRequestSchema, () => ({ prompts: PROMPTS }));
  server.setRequestHandler(GetPromptRequestSchema, (request) => {
    const args = request.params.arguments ?? {};
    switch (request.params.name) {
      case "test_simple_prompt":
        return { messages: [{ role: "user", content: { type: "text", text: "This is a simple prompt for testing." } }] };
      case "test_prompt_with_arguments":
        return {
          messages: [{ role: "user", content: { type: "text", text: `Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'` } }],
        };
      case "test_prompt_with_embedded_resource":
        return {
          messages: [
            {
              role: "user",
              content: {
                type: "resource",
                resource: {
                  uri: args.resourceUri ?? "test://example-resource",
                  mimeType: "text/plain",
                  text: "Embedded resource content for testing.",
                },
              },
            },
            { role: "user", content: { type: "text", text: "Please process the embedded resource above." } },
          ],
        };
      case "test_prompt_with_image":
        return {
          messages: [
            { role: "user", content: { type: "image", data: PNG, mimeType: "image/png" } },
            { role: "user", content: { type: "text", text: "Please analyze the image above." } },
          ],
        };
    }
    throw new McpError(ErrorCode.InvalidParams, `Unknown prompt: ${request.params.name}`);
  });

  server.setRequestHandler(SetLevelRequestSchema, (request) => {
    log(`Log level set to: ${request.params.level}`);
    return {};
  });
  server.setRequestHandler(CompleteRequestSchema, () => ({ completion: { values: [], total: 0, hasMore: false } }));
  return server;
}

/** An in-memory event store: SSE answers carry ids, and a client may resume one (SEP-1699). */
function eventStore(): EventStore {
  const events = new Map<string, { streamId: string; message: JSONRPCMessage }>();
  let counter = 0;
  return {
    async storeEvent(streamId, message) {
      counter += 1;
      const id = `${streamId}::${String(counter).padStart(10, "0")}`;
      events.set(id, { streamId, message });
      return id;
    },
    async replayEventsAfter(lastEventId, { send }) {
      const streamId = lastEventId.split("::")[0]!;
      for (const [id, event] of [...events].sort(([a], [b]) => a.localeCompare(b))) {
        if (event.streamId === streamId && id > lastEventId) await send(id, event.message);
      }
      return streamId;
    },
  };
}

export interface ConformanceUpstream {
  url: string;
  /** Sessions opened so far. */
  sessions(): number;
  close(): Promise<void>;
}

/** The conformance upstream on a loopback port, with DNS-rebinding protection on its own Host. */
export async function serveConformanceUpstream(): Promise<ConformanceUpstream> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers: Server[] = [];
  let port = 0;
  let opened = 0;
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    if (!req.url?.startsWith("/mcp")) return res.writeHead(404).end();
    let parsedBody: unknown;
    if (req.method === "POST") {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      try {
        parsedBody = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        return res
          .writeHead(400, { "content-type": "application/json" })
          .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
      }
    }
    const sessionId = req.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (existing) return existing.handleRequest(req, res, parsedBody);
    if (sessionId)
      return res
        .writeHead(404, { "content-type": "application/json" })
        .end('{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
    let transport: StreamableHTTPServerTransport | undefined;
    const server = conformanceServer(() => transport);
    servers.push(server);
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: eventStore(),
      retryInterval: 500,
      enableDnsRebindingProtection: true,
      allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`],
      onsessioninitialized: (id) => {
        opened += 1;
        transports.set(id, transport!);
      },
    });
    transport.onclose = () => {
      if (transport!.sessionId) transports.delete(transport!.sessionId);
    };
    await server.connect(transport);
    await transport.handleRequest(req, res, parsedBody);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  port = (http.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions: () => opened,
    async close() {
      await Promise.all(servers.map((server) => server.close().catch(() => undefined)));
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}
