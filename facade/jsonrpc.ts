import type { H3 } from "h3";
import type { JSONRPCRequest, JSONRPCResponse } from "json-rpc-2.0";
import { callFacts, type Dispatcher } from "../rpc/dispatcher.js";
import { ServiceError } from "../rpc/errors.js";
import { readJsonBody } from "./transport/body.js";
import { instrument, jsonResponse, scopeFacts } from "./transport/instrument.js";
import { errorBody } from "../rpc/surfaces.js";
import { presentedFor } from "./transport/surfaces.js";
import { isObject } from "../rpc/validate.js";

/** Most requests one batch may carry. */
export const MAX_BATCH = 50;

/**
 * `POST /rpc`: every dispatcher method by name over JSON-RPC 2.0, with the Gateway's
 * credential presentations and each method's own auth. Batches and notifications follow the
 * spec; a notification-only request is answered 202 with no body. Parse errors and invalid
 * requests answer HTTP 400 with the JSON-RPC error; everything else 200.
 */
export function mountJsonRpc(app: H3, dispatcher: Dispatcher) {
  const { config } = dispatcher.ports;
  app.on(
    "POST",
    "/rpc",
    instrument("rpc", dispatcher.ports, async (event, scope) => {
      const request = event.req;
      const body = await readJsonBody(request, config.GATEWAY_MAX_PAYLOAD_BYTES);
      if (body === undefined) throw new ServiceError("INVALID_REQUEST", "Empty request");
      if (Array.isArray(body) && body.length === 0) throw new ServiceError("INVALID_REQUEST", "Empty batch");
      if (Array.isArray(body) && body.length > MAX_BATCH) throw new ServiceError("INVALID_REQUEST", `Batch exceeds ${MAX_BATCH} requests`);
      if (!Array.isArray(body))
        scope.log.operation = typeof (body as { method?: unknown })?.method === "string" ? (body as { method: string }).method : undefined;
      // Methods' headers stay off the JSON-RPC answer (a batch mixes many calls); the calls join its log line.
      const facts = callFacts({
        ...scopeFacts(scope),
        surface: "rpc",
        transport: "rpc",
        presented: presentedFor("rpc", request),
        responseHeaders: new Headers(),
      });
      // JSON-RPC 2.0 §4, §6: anything but an object is an Invalid Request (-32600), alone or
      // inside a batch; the library is only handed objects.
      const invalid = () =>
        errorBody(
          "rpc",
          new ServiceError("INVALID_REQUEST", "Invalid Request: each request must be a JSON object"),
          scope.requestId,
        ) as JSONRPCResponse;
      const one = (message: unknown) =>
        isObject(message) ? dispatcher.jsonrpc.receive(message as unknown as JSONRPCRequest, facts) : Promise.resolve(invalid());
      const answer = Array.isArray(body)
        ? (await Promise.all(body.map(one))).filter((reply): reply is JSONRPCResponse => reply !== null)
        : await one(body);
      if (answer === null || (Array.isArray(answer) && answer.length === 0)) {
        return new Response(null, { status: 202, headers: scope.responseHeaders });
      }
      const replies = Array.isArray(answer) ? answer : [answer];
      const allInvalid = replies.every((reply) => reply.error?.code === -32600);
      return jsonResponse(answer, allInvalid ? 400 : 200, scope.responseHeaders);
    }),
  );
}
