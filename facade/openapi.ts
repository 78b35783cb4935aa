import { toJsonSchema } from "@valibot/to-json-schema";
import type { GenericSchema } from "valibot";
import type { AnyMethod, HttpBinding } from "../rpc/define.js";
import { contractErrors, type ContractError } from "../rpc/method-errors.js";
import type { Registry } from "../rpc/registry.js";
import { HTTP_SURFACES, SURFACES, profileOf, type ErrorSchemaName } from "../rpc/surfaces.js";
import { fullPath } from "./rest.js";

type JsonObject = Record<string, unknown>;

const ERROR_SCHEMAS: Record<ErrorSchemaName, JsonObject> = {
  OpenAIError: {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["message", "type"],
        properties: { message: { type: "string" }, type: { type: "string" }, code: { type: "string" } },
      },
    },
  },
  FlatError: { type: "object", required: ["error", "code"], properties: { error: { type: "string" }, code: { type: "string" } } },
  ConsoleError: {
    type: "object",
    required: ["error"],
    properties: { error: { type: "object", required: ["message"], properties: { message: { type: "string" } } } },
  },
  AnthropicError: {
    type: "object",
    required: ["type", "error"],
    properties: {
      type: { const: "error" },
      error: { type: "object", required: ["type", "message"], properties: { type: { type: "string" }, message: { type: "string" } } },
    },
  },
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

function jsonSchema(schema: GenericSchema): JsonObject {
  const out = toJsonSchema(schema, { errorMode: "ignore", target: "draft-2020-12" }) as JsonObject;
  delete out.$schema;
  return out;
}

/**
 * The security requirements of one binding, from the method's declared credential kinds and
 * what the surface reads (docs/interface.md 5): each entry is an alternative. A session-only method does
 * not advertise X-API-Key, which it refuses.
 */
function security(method: AnyMethod, binding: HttpBinding): JsonObject[] {
  if (method.auth === "public") return [];
  const kinds = new Set(method.auth.kinds);
  const out: JsonObject[] = [];
  const reads = profileOf(binding.surface, binding.dialect).credentials;
  if (kinds.has("console") && reads.includes("cookie")) out.push({ consoleSession: [] });
  if (kinds.has("session")) out.push({ sessionToken: [] });
  const keyKinds = ["gateway_key", "platform_key", "account_key", "service"].filter((kind) => kinds.has(kind as never));
  if (keyKinds.length) out.push({ apiKeyBearer: [] });
  if (reads.includes("apiKey") && (kinds.has("gateway_key") || kinds.has("service") || kinds.has("account_key")))
    out.push({ apiKeyHeader: [] });
  return out;
}

/**
 * The error responses of a method through a surface, by status: its contract's errors
 * (rpc/method-errors.ts: the declared codes and those its auth, input and policies, its own and
 * its surface's, imply), so the document lists exactly what the declaration says. Each
 * response names its codes (`x-error-codes`).
 */
function errorResponses(method: AnyMethod, binding: HttpBinding, hasParams: boolean): Record<string, JsonObject> {
  const byStatus = new Map<number, ContractError[]>();
  for (const error of contractErrors(method, { hasParams, surface: binding.surface }))
    byStatus.set(error.status, [...(byStatus.get(error.status) ?? []), error]);
  return Object.fromEntries(
    [...byStatus.entries()].sort(([a], [b]) => a - b).map(([status, errors]) => [String(status), errorResponse(binding, status, errors)]),
  );
}

function errorResponse(binding: HttpBinding, status?: number | "4XX", errors: ContractError[] = []): JsonObject {
  // docs/interface.md 7.1: the Account API refuses credentials with a flat {error, code}.
  const { errorSchema, authErrorSchema } = profileOf(binding.surface, binding.dialect).openapi!;
  const schema = authErrorSchema && (status === 401 || status === 403) ? authErrorSchema : errorSchema;
  const codes = errors.map((error) => `\`${error.code}\`${error.message ? ` (${error.message})` : ""}`).join(", ");
  const description =
    status === "4XX"
      ? "Any other client error (a malformed request, a method not allowed here, a body too large)"
      : status
        ? `Error (${ERROR_DESCRIPTIONS[status] ?? "see the error body"})${codes ? `: ${codes}` : ""}`
        : "Error";
  return {
    description,
    ...(errors.length ? { "x-error-codes": errors.map((error) => error.code) } : {}),
    content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` } } },
  };
}

const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: "invalid parameters",
  401: "missing or invalid credential",
  402: "insufficient credits",
  403: "not allowed",
  404: "not found",
  409: "conflict with the current state",
  413: "payload too large",
  429: "rate limit or allowance reached",
  502: "upstream failed",
  503: "unavailable",
  504: "upstream timed out",
  529: "overloaded: no model can answer now",
};

function operation(method: AnyMethod, binding: HttpBinding, multiple: boolean): JsonObject {
  const schema = jsonSchema(method.input);
  const properties = (schema.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((schema.required ?? []) as string[]);
  const pathNames = [...binding.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const parameters: JsonObject[] = pathNames.map((name) => ({
    name,
    in: "path",
    required: true,
    schema: properties[name] ?? { type: "string" },
  }));
  const bodyProps: Record<string, JsonObject> = {};
  for (const [name, prop] of Object.entries(properties)) {
    if (pathNames.includes(name)) continue;
    // A raw binding takes the query and body as they come (rpc/define.ts RawRequest).
    if (binding.raw) continue;
    if (binding.method === "GET" || binding.method === "DELETE")
      parameters.push({ name, in: "query", required: required.has(name), schema: prop });
    else bodyProps[name] = prop;
  }
  for (const [header, name] of Object.entries(binding.headerParams ?? {})) {
    parameters.push({
      name: header,
      in: "header",
      required: false,
      description: `Same as \`${name}\` when that is not given`,
      schema: properties[name] ?? { type: "string" },
    });
  }
  const op: JsonObject = {
    operationId: multiple
      ? `${method.name}.${binding.surface}${method.http.filter((other) => other.surface === binding.surface).length > 1 ? `.${binding.method.toLowerCase()}` : ""}`
      : method.name,
    summary: method.summary,
    tags: [SURFACES[binding.surface].title],
    parameters,
    responses: {
      [String(binding.status ?? 200)]: {
        description: method.stream ? "Success; `text/event-stream` when `stream` is true" : "Success",
        content: {
          "application/json": { schema: method.output ? jsonSchema(method.output) : {} },
          ...(method.stream ? { "text/event-stream": { schema: { type: "string" } } } : {}),
        },
      },
      ...errorResponses(method, binding, Object.keys(properties).length > 0),
      "4XX": errorResponse(binding, "4XX"),
      default: errorResponse(binding),
    },
    "x-jsonrpc-method": method.name,
    // Names `POST /rpc` still answers to, deprecated (docs/versioning.md "Renamed JSON-RPC methods").
    ...(method.formerNames?.length ? { "x-jsonrpc-deprecated-names": method.formerNames } : {}),
  };
  if (Object.keys(bodyProps).length > 0) {
    op.requestBody = {
      required: [...required].some((name) => name in bodyProps),
      content: {
        "application/json": {
          schema: { type: "object", properties: bodyProps, required: [...required].filter((name) => name in bodyProps) },
        },
      },
    };
  }
  if (binding.raw && binding.method !== "GET" && binding.method !== "DELETE") {
    op.requestBody = { required: false, content: { "*/*": { schema: {} } } };
  }
  op.security = security(method, binding);
  if (method.auth !== "public" && method.auth.scopes?.length) op["x-required-scopes"] = method.auth.scopes;
  if (method.auth !== "public" && method.auth.operator) op["x-operator-only"] = true;
  return op;
}

const JSON_RPC_ERROR = {
  type: "object",
  required: ["code", "message"],
  properties: {
    code: {
      type: "integer",
      description:
        "-32700 parse error, -32600 invalid request, -32601 unknown method, -32602 invalid params, -320xx service " +
        "errors (-32001 = 401, -32003 = 403, -32004 = 404, -32029 = 429)",
    },
    message: { type: "string" },
    data: { type: "object", properties: { code: { type: "string" }, status: { type: "integer" }, requestId: { type: "string" } } },
  },
};
const JSON_RPC_REQUEST = {
  type: "object",
  required: ["jsonrpc", "method"],
  properties: {
    jsonrpc: { const: "2.0" },
    id: { type: ["string", "integer", "null"] },
    method: { type: "string" },
    params: { type: "object" },
  },
};
const JSON_RPC_RESPONSE = {
  type: "object",
  required: ["jsonrpc", "id"],
  properties: { jsonrpc: { const: "2.0" }, id: { type: ["string", "integer", "null"] }, result: {}, error: JSON_RPC_ERROR },
};

/** `POST /rpc`: the dispatcher's methods by name (facade/jsonrpc.ts), each with its own credentials. */
const JSON_RPC_PATH = {
  post: {
    operationId: "rpc",
    summary: "Call any operation by name over JSON-RPC 2.0 (single or batch of up to 50; notifications get 202)",
    description:
      "The method is an operation's `x-jsonrpc-method`; params are its parameters as one object. Credentials are the " +
      "Gateway's (session token, `X-API-Key`, bearer key), checked per method: errors come back as JSON-RPC errors " +
      "with HTTP 200, except a request that is not JSON-RPC (400).",
    tags: [SURFACES.rpc.title],
    requestBody: {
      required: true,
      content: {
        "application/json": {
          schema: { oneOf: [JSON_RPC_REQUEST, { type: "array", minItems: 1, maxItems: 50, items: JSON_RPC_REQUEST }] },
        },
      },
    },
    responses: {
      "200": {
        description: "The response, or the batch's responses",
        content: { "application/json": { schema: { oneOf: [JSON_RPC_RESPONSE, { type: "array", items: JSON_RPC_RESPONSE }] } } },
      },
      "202": { description: "Only notifications: no body" },
      "400": { description: "Parse error or invalid request", content: { "application/json": { schema: JSON_RPC_RESPONSE } } },
      "413": { description: "Body larger than GATEWAY_MAX_PAYLOAD_BYTES", content: { "application/json": { schema: JSON_RPC_RESPONSE } } },
    },
    security: [{ sessionToken: [] }, { apiKeyBearer: [] }, { apiKeyHeader: [] }, {}],
  },
};

/** OpenAPI 3.1, generated from the same registry as the routes. */
export function buildOpenApi(registry: Registry, serverUrl?: string): JsonObject {
  const paths: Record<string, Record<string, JsonObject>> = {};
  for (const method of Object.values(registry)) {
    if (method.internal) continue;
    for (const binding of method.http) {
      const path = fullPath(binding)
        .replace(/\*\*:(\w+)/g, ":$1")
        .replace(/:(\w+)/g, "{$1}");
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
    ...(serverUrl ? { servers: [{ url: serverUrl, description: "This instance; each surface is a base path on it" }] } : {}),
    tags: [
      ...[...HTTP_SURFACES, "rpc" as const].map((surface) => ({
        name: SURFACES[surface].title,
        description: SURFACES[surface].description,
      })),
    ],
    paths: { ...paths, "/rpc": JSON_RPC_PATH },
    components: {
      schemas: ERROR_SCHEMAS,
      securitySchemes: {
        sessionToken: {
          type: "http",
          scheme: "bearer",
          bearerFormat: "JWT",
          description: "A session token from sign-in (`POST /gateway/v1/auth/login`)",
        },
        apiKeyBearer: {
          type: "http",
          scheme: "bearer",
          description:
            "An API key of the kind the surface takes (Platform `sk-…`, Account personal, Gateway `sk_…`), or the service credential on bridge methods",
        },
        apiKeyHeader: {
          type: "apiKey",
          in: "header",
          name: "X-API-Key",
          description: "A Gateway key (or the service credential) in a header",
        },
        consoleSession: { type: "apiKey", in: "cookie", name: "gw_console" },
      },
    },
  };
}
