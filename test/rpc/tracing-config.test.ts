import { describe, expect, it } from "vitest";
import { traceProtocol } from "../../rpc/tracing-sdk.js";

/** When the standard OTEL_* variables turn traces on, and with which protocol (docs/observability.md "Traces"). */
describe("tracing configuration", () => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };

  it("is off without an endpoint, whatever else is set", () => {
    expect(traceProtocol({})).toBeUndefined();
    expect(
      traceProtocol({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on", OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" }),
    ).toBeUndefined();
    expect(traceProtocol({ OTEL_EXPORTER_OTLP_ENDPOINT: "  " })).toBeUndefined();
  });

  it("is on with either endpoint variable, http/protobuf by default", () => {
    expect(traceProtocol(endpoint)).toBe("http/protobuf");
    expect(traceProtocol({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:4318/v1/traces" })).toBe("http/protobuf");
  });

  it("takes http/json from the general or the traces-only protocol variable, the latter first", () => {
    expect(traceProtocol({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toBe("http/json");
    expect(
      traceProtocol({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "http/json", OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf" }),
    ).toBe("http/protobuf");
  });

  it("stays off when the SDK is disabled or the traces exporter is none", () => {
    expect(traceProtocol({ ...endpoint, OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(traceProtocol({ ...endpoint, OTEL_SDK_DISABLED: "TRUE" })).toBeUndefined();
    expect(traceProtocol({ ...endpoint, OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
    expect(traceProtocol({ ...endpoint, OTEL_SDK_DISABLED: "false", OTEL_TRACES_EXPORTER: "otlp" })).toBe("http/protobuf");
  });

  it("refuses a protocol it cannot speak, naming the ones it can", () => {
    expect(() => traceProtocol({ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(
      /grpc is not supported: use http\/protobuf or http\/json/,
    );
  });
});
