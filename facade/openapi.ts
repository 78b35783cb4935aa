import { toJsonSchema } from "@valibot/to-json-schema";
import type { AnyMethod, HttpBinding, Surface } from "../rpc/define.js";
import type { Registry } from "../rpc/registry.js";
import { fullPath } from "./rest.js";

type JsonObject = Record<string, unknown>;

const SURFACE_TITLES: Record<Surface, string> = {
  platform: "Platform API",
  console: "Console keys",
  account: "Account API",
  gateway: "Gateway API",
  bridge: "Tool bridge",
};

const ERROR_SCHEMAS: Record<string, JsonObject> = {
  OpenAIError: {
    type: "object",
    required: ["error"],
    properties: { error: { type: "object", required: ["message", "type"], properties: { message: { type: "string" }, type: { type: "string" }, code: { type: "string" } } } },
  },
  FlatError: { type: "object", required: ["error", "code"], properties: { error: { type: "string" }, code: { type: "string" } } },
  ConsoleError: { type: "object", required: ["error"], properties: { error: { type: "object", required: ["message"], properties: { message: { type: "string" } } } } },
  GatewayError: {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message", "requestId"],
        properties: { code: { type: "string" }, message: { type: "string" }, requestId: { type: "string" }, details: {} },
      },
    },
  },
};

const ERROR_SCHEMA_OF: Record<Surface, string> = {
  platform: "OpenAIError",
  account: "OpenAIError",
  console: "ConsoleError",
  gateway: "GatewayError",
  bridge: "GatewayError",
};

function schemaOf(method: AnyMethod): JsonObject {
  const schema = toJsonSchema(method.input, { errorMode: "ignore", target: "draft-2020-12" }) as JsonObject;
  delete schema.$schema;
  return schema;
}

function security(method: AnyMethod, surface: Surface): JsonObject[] | undefined {
  if (method.auth === "public") return [];
  if (surface === "console") return [{ consoleSession: [] }];
  if (surface === "gateway" || surface === "bridge") return [{ bearerAuth: [] }, { apiKeyHeader: [] }];
  return [{ bearerAuth: [] }];
}

function operation(method: AnyMethod, binding: HttpBinding, multiple: boolean): JsonObject {
  const schema = schemaOf(method);
  const properties = (schema.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((schema.required ?? []) as string[]);
  const pathNames = [...binding.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const parameters: JsonObject[] = pathNames.map((name) => ({ name, in: "path", required: true, schema: properties[name] ?? { type: "string" } }));
  const bodyProps: Record<string, JsonObject> = {};
  for (const [name, prop] of Object.entries(properties)) {
    if (pathNames.includes(name)) continue;
    if (binding.method === "GET" || binding.method === "DELETE") parameters.push({ name, in: "query", required: required.has(name), schema: prop });
    else bodyProps[name] = prop;
  }
  const op: JsonObject = {
    operationId: multiple ? `${method.name}.${binding.surface}` : method.name,
    summary: method.summary,
    tags: [SURFACE_TITLES[binding.surface]],
    parameters,
    responses: {
      [String(binding.status ?? 200)]: {
        description: method.stream ? "Success; `text/event-stream` when `stream` is true" : "Success",
        content: {
          "application/json": { schema: {} },
          ...(method.stream ? { "text/event-stream": { schema: { type: "string" } } } : {}),
        },
      },
      default: { description: "Error", content: { "application/json": { schema: { $ref: `#/components/schemas/${ERROR_SCHEMA_OF[binding.surface]}` } } } },
    },
    "x-jsonrpc-method": method.name,
  };
  if (Object.keys(bodyProps).length > 0) {
    op.requestBody = {
      required: [...required].some((name) => name in bodyProps),
      content: { "application/json": { schema: { type: "object", properties: bodyProps, required: [...required].filter((name) => name in bodyProps) } } },
    };
  }
  const sec = security(method, binding.surface);
  if (sec) op.security = sec;
  return op;
}

/** OpenAPI 3.1, generated from the same registry as the routes. */
export function buildOpenApi(registry: Registry, serverUrl?: string): JsonObject {
  const paths: Record<string, Record<string, JsonObject>> = {};
  for (const method of Object.values(registry)) {
    for (const binding of method.http) {
      const path = fullPath(binding).replace(/:(\w+)/g, "{$1}");
      paths[path] ??= {};
      paths[path][binding.method.toLowerCase()] = operation(method, binding, method.http.length > 1);
    }
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Chat, agent and tool gateway",
      version: "1.0.0",
      description:
        "Every operation is also callable over JSON-RPC 2.0 at `POST /rpc` under the name in `x-jsonrpc-method`, with the Gateway's credentials.",
    },
    ...(serverUrl ? { servers: [{ url: serverUrl }] } : {}),
    tags: Object.values(SURFACE_TITLES).map((name) => ({ name })),
    paths,
    components: {
      schemas: ERROR_SCHEMAS,
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "Session token or API key" },
        apiKeyHeader: { type: "apiKey", in: "header", name: "X-API-Key" },
        consoleSession: { type: "apiKey", in: "cookie", name: "gw_console" },
      },
    },
  };
}
