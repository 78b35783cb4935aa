import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { ProtobufReader } from "@opentelemetry/otlp-transformer/build/src/common/protobuf/protobuf-reader.js";

/** One exported span, the same whichever protocol carried it. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  /** OTLP's numbering: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  attributes: Record<string, unknown>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The endpoint for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  endpoint: string;
  spans: ReceivedSpan[];
  /** The content type of every export request received. */
  contentTypes: string[];
  /** The headers of every export request received. */
  headers: Record<string, string | string[] | undefined>[];
  /** The raw bodies, for checks that a secret never left the service. */
  rawBodies: Buffer[];
  close(): Promise<void>;
}

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex");

/** Reads the fields of one message: `onField(number, wireType, reader)` must consume the value or return false to skip it. */
function readMessage(bytes: Uint8Array, onField: (field: number, wire: number, reader: ProtobufReader) => boolean): void {
  const reader = new ProtobufReader(bytes);
  while (!reader.isAtEnd()) {
    const { fieldNumber, wireType } = reader.readTag();
    if (!onField(fieldNumber, wireType, reader)) reader.skip(wireType);
  }
}

function readDouble(reader: ProtobufReader): number {
  const bytes = (reader as unknown as { _buf: Uint8Array })._buf;
  const value = Buffer.from(bytes.buffer, bytes.byteOffset + reader.pos, 8).readDoubleLE(0);
  reader.pos += 8;
  return value;
}

// AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array (ArrayValue: 1 values).
function readAnyValue(bytes: Uint8Array): unknown {
  let value: unknown;
  readMessage(bytes, (field, wire, reader) => {
    if (field === 1 && wire === 2) value = reader.readString();
    else if (field === 2 && wire === 0) value = reader.readVarint() !== 0;
    else if (field === 3 && wire === 0) value = reader.readVarint();
    else if (field === 4 && wire === 1) value = readDouble(reader);
    else if (field === 5 && wire === 2) {
      const values: unknown[] = [];
      readMessage(reader.readBytes(), (f, w, r) => {
        if (f !== 1 || w !== 2) return false;
        values.push(readAnyValue(r.readBytes()));
        return true;
      });
      value = values;
    } else return false;
    return true;
  });
  return value;
}

// KeyValue: 1 key, 2 value.
function readKeyValue(bytes: Uint8Array, into: Record<string, unknown>): void {
  let key = "";
  let value: unknown;
  readMessage(bytes, (field, wire, reader) => {
    if (field === 1 && wire === 2) key = reader.readString();
    else if (field === 2 && wire === 2) value = readAnyValue(reader.readBytes());
    else return false;
    return true;
  });
  into[key] = value;
}

/**
 * ExportTraceServiceRequest (OTLP's trace_service.proto): resource_spans 1 → resource 1
 * (attributes 1), scope_spans 2 → spans 2 → trace_id 1, span_id 2, parent_span_id 4, name 5,
 * kind 6, attributes 9, status 15 (code 3). Read with otlp-transformer's protobuf reader.
 */
function decodeProtobuf(body: Uint8Array): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  readMessage(body, (field, wire, reader) => {
    if (field !== 1 || wire !== 2) return false;
    const resource: Record<string, unknown> = {};
    const scopeSpans: Uint8Array[] = [];
    readMessage(reader.readBytes(), (f, w, r) => {
      if (f === 1 && w === 2)
        readMessage(r.readBytes(), (rf, rw, rr) => {
          if (rf !== 1 || rw !== 2) return false;
          readKeyValue(rr.readBytes(), resource);
          return true;
        });
      else if (f === 2 && w === 2) scopeSpans.push(r.readBytes());
      else return false;
      return true;
    });
    for (const scope of scopeSpans)
      readMessage(scope, (f, w, r) => {
        if (f !== 2 || w !== 2) return false;
        const span: ReceivedSpan = { traceId: "", spanId: "", parentSpanId: "", name: "", kind: 0, attributes: {}, status: 0, resource };
        readMessage(r.readBytes(), (sf, sw, sr) => {
          if (sf === 1 && sw === 2) span.traceId = hex(sr.readBytes());
          else if (sf === 2 && sw === 2) span.spanId = hex(sr.readBytes());
          else if (sf === 4 && sw === 2) span.parentSpanId = hex(sr.readBytes());
          else if (sf === 5 && sw === 2) span.name = sr.readString();
          else if (sf === 6 && sw === 0) span.kind = sr.readVarint();
          else if (sf === 9 && sw === 2) readKeyValue(sr.readBytes(), span.attributes);
          else if (sf === 15 && sw === 2)
            readMessage(sr.readBytes(), (cf, cw, cr) => {
              if (cf !== 3 || cw !== 0) return false;
              span.status = cr.readVarint();
              return true;
            });
          else return false;
          return true;
        });
        spans.push(span);
        return true;
      });
    return true;
  });
  return spans;
}

interface JsonValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: JsonValue[] };
}
type JsonAttributes = { key: string; value: JsonValue }[] | undefined;

const jsonValue = (value: JsonValue): unknown =>
  value.stringValue ??
  value.boolValue ??
  (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
  value.doubleValue ??
  value.arrayValue?.values?.map(jsonValue);
const jsonAttributes = (list: JsonAttributes) => Object.fromEntries((list ?? []).map(({ key, value }) => [key, jsonValue(value)]));

/** OTLP/JSON: the same messages in their JSON mapping (ids as hex strings). */
function decodeJson(body: Buffer): ReceivedSpan[] {
  const request = JSON.parse(body.toString("utf8")) as {
    resourceSpans?: {
      resource?: { attributes?: JsonAttributes };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: JsonAttributes;
          status?: { code?: number };
        }[];
      }[];
    }[];
  };
  return (request.resourceSpans ?? []).flatMap((resourceSpans) => {
    const resource = jsonAttributes(resourceSpans.resource?.attributes);
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? "",
        name: span.name,
        kind: span.kind,
        attributes: jsonAttributes(span.attributes),
        status: span.status?.code ?? 0,
        resource,
      })),
    );
  });
}

/** A real OTLP/HTTP trace receiver on 127.0.0.1: `POST /v1/traces` in http/protobuf or http/json. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const headers: Record<string, string | string[] | undefined>[] = [];
  const rawBodies: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const type = req.headers["content-type"] ?? "";
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      rawBodies.push(body);
      contentTypes.push(type);
      headers.push(req.headers);
      if (type.startsWith("application/json")) {
        spans.push(...decodeJson(body));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      } else {
        spans.push(...decodeProtobuf(new Uint8Array(body)));
        res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    headers,
    rawBodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
