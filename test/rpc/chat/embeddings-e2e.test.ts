import { createHash, randomUUID } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import { createOpenAI } from "@ai-sdk/openai";
import { cosineSimilarity, embed, embedMany } from "ai";
import { createBedrockEmbeddingsUpstream } from "../../../mocks/bedrock-embeddings-upstream.js";
import { mockTokens, mockVector, type EmbeddingCall, type EmbeddingsMock } from "../../../mocks/embedding-vectors.js";
import { createGeminiEmbeddingsUpstream, GEMINI_MOCK_DIMENSIONS } from "../../../mocks/gemini-embeddings-upstream.js";
import { createOpenAiEmbeddingsUpstream, OPENAI_MOCK_DIMENSIONS } from "../../../mocks/openai-embeddings-upstream.js";
import { countTokens } from "../../../rpc/chat/tokens.js";
import { mockUpstreams } from "../../helpers/mock-upstreams.js";
import { bearer, registerUser, startTestServer, type TestServer } from "../../helpers/server.js";
import { loopbackFetch, openaiClient, usageOf } from "../../helpers/chat.js";

/**
 * `POST /embeddings` end to end over real HTTP (docs/embeddings.md): the official `openai`
 * client (base64 by default, which it decodes, and float) and the AI SDK's `embed`/`embedMany`
 * on the Gateway and Account APIs, through every adapter, each provider mocked in its documented
 * wire format. Every test checks what the provider received (path, credential, body in its
 * native form), that each input's vector comes back at its index, that the usage is the
 * provider's (the gateway's count where the provider reports none), and that the request is
 * metered: the plan allowance, the usage report by model and the log line's cost at
 * `price.input` per 1,000 tokens.
 */

const OPENAI = "https://api.openai.test/v1";
const AZURE = "https://emb-resource.openai.azure.test";
const GEMINI = "https://generativelanguage.test/v1beta";
const BEDROCK = "https://bedrock-runtime.us-west-2.amazonaws.com";
const KEYS = {
  openai: "sk-emb-openai-secret",
  azure: "azure-emb-secret",
  gemini: "gemini-emb-secret",
  awsKeyId: "AKIDEMB",
  awsSecret: "aws-emb-secret",
};

const openai = createOpenAiEmbeddingsUpstream(OPENAI);
const azure = createOpenAiEmbeddingsUpstream(`${AZURE}/openai/deployments/embed-prod`);
const gemini = createGeminiEmbeddingsUpstream(GEMINI);
const bedrock = createBedrockEmbeddingsUpstream(BEDROCK);
const msw = mockUpstreams(...openai.handlers, ...azure.handlers, ...gemini.handlers, ...bedrock.handlers);

const unit = (vector: number[]) => {
  const norm = Math.hypot(...vector);
  return vector.map((value) => value / norm);
};

interface Case {
  id: string;
  entry: () => Record<string, unknown>;
  upstream: EmbeddingsMock;
  price: number;
  /** The vector the provider gives this text (in this many dimensions, or its default). */
  vector(text: string, dimensions?: number): number[];
  /** The tokens billed for these texts: the provider's, or the gateway's count where it reports none. */
  tokens(texts: string[]): number;
  /** A `dimensions` the provider takes. */
  dimensions: number;
  /** The calls the provider got for these texts (sent as `input`), checked in its native form. */
  expectCalls(calls: EmbeddingCall[], texts: string[], dimensions?: number, input?: string | string[]): void;
}

const gatewayCount = (texts: string[]) => texts.reduce((sum, text) => sum + countTokens(text), 0);
const providerCount = (texts: string[]) => texts.reduce((sum, text) => sum + mockTokens(text), 0);

const CASES: Case[] = [
  {
    id: "emb-openai",
    entry: () => ({
      provider: "openai-compatible",
      baseURL: msw.url(OPENAI),
      apiKeyEnv: "EMB_OPENAI_KEY",
      upstreamModel: "text-embedding-3-small",
    }),
    upstream: openai,
    price: 20,
    vector: (text, dimensions) => mockVector(text, dimensions ?? OPENAI_MOCK_DIMENSIONS),
    tokens: providerCount,
    dimensions: 4,
    expectCalls(calls, texts, dimensions, input = texts) {
      expect(calls).toHaveLength(1);
      const [call] = calls;
      expect(call!.url.href).toBe("https://api.openai.test/v1/embeddings");
      expect(call!.headers.get("authorization")).toBe(`Bearer ${KEYS.openai}`);
      expect(call!.headers.get("api-key")).toBeNull();
      // The client's body as it came, the model replaced by the upstream's.
      expect(call!.body).toMatchObject({ model: "text-embedding-3-small", input, ...(dimensions ? { dimensions } : {}) });
    },
  },
  {
    id: "emb-azure",
    entry: () => ({
      provider: "azure-openai",
      baseURL: msw.url(AZURE),
      apiKeyEnv: "EMB_AZURE_KEY",
      upstreamModel: "embed-prod",
      apiVersion: "2024-10-21",
    }),
    upstream: azure,
    price: 25,
    vector: (text, dimensions) => mockVector(text, dimensions ?? OPENAI_MOCK_DIMENSIONS),
    tokens: providerCount,
    dimensions: 4,
    expectCalls(calls, texts, dimensions, input = texts) {
      expect(calls).toHaveLength(1);
      const [call] = calls;
      expect(call!.url.href).toBe("https://emb-resource.openai.azure.test/openai/deployments/embed-prod/embeddings?api-version=2024-10-21");
      expect(call!.headers.get("api-key")).toBe(KEYS.azure);
      expect(call!.headers.get("authorization")).toBeNull();
      expect(call!.body).toMatchObject({ model: "embed-prod", input, ...(dimensions ? { dimensions } : {}) });
    },
  },
  {
    id: "emb-gemini",
    entry: () => ({ provider: "gemini", baseURL: msw.url(GEMINI), apiKeyEnv: "EMB_GEMINI_KEY", upstreamModel: "gemini-embedding-001" }),
    upstream: gemini,
    price: 150,
    // A vector Gemini cut to fewer dimensions is normalised by the gateway.
    vector: (text, dimensions) => (dimensions ? unit(mockVector(text, dimensions)) : mockVector(text, GEMINI_MOCK_DIMENSIONS)),
    tokens: gatewayCount,
    dimensions: 6,
    expectCalls(calls, texts, dimensions) {
      expect(calls).toHaveLength(1);
      const [call] = calls;
      expect(call!.url.href).toBe("https://generativelanguage.test/v1beta/models/gemini-embedding-001:batchEmbedContents");
      expect(call!.headers.get("x-goog-api-key")).toBe(KEYS.gemini);
      expect(call!.headers.get("authorization")).toBeNull();
      expect(call!.body).toEqual({
        requests: texts.map((text) => ({
          model: "models/gemini-embedding-001",
          content: { parts: [{ text }] },
          ...(dimensions ? { outputDimensionality: dimensions } : {}),
        })),
      });
    },
  },
  {
    id: "emb-titan",
    entry: () => ({ provider: "bedrock", region: "us-west-2", baseURL: msw.url(BEDROCK), upstreamModel: "amazon.titan-embed-text-v2:0" }),
    upstream: bedrock,
    price: 20,
    vector: (text, dimensions) => mockVector(text, dimensions ?? 1024),
    tokens: providerCount,
    dimensions: 256,
    expectCalls(calls, texts, dimensions) {
      // One text per InvokeModel call.
      expect(calls.map((call) => call.body.inputText).sort()).toEqual([...texts].sort());
      for (const call of calls) {
        expect(call.url.href).toBe("https://bedrock-runtime.us-west-2.amazonaws.com/model/amazon.titan-embed-text-v2%3A0/invoke");
        expect(call.body).toEqual({ inputText: call.body.inputText, ...(dimensions ? { dimensions } : {}) });
        expectSigned(call);
      }
    },
  },
  {
    id: "emb-cohere",
    entry: () => ({ provider: "bedrock", region: "us-west-2", baseURL: msw.url(BEDROCK), upstreamModel: "cohere.embed-v4:0" }),
    upstream: bedrock,
    price: 100,
    vector: (text, dimensions) => mockVector(text, dimensions ?? 1024),
    tokens: gatewayCount,
    dimensions: 512,
    expectCalls(calls, texts, dimensions) {
      expect(calls).toHaveLength(1);
      const [call] = calls;
      expect(call!.url.href).toBe("https://bedrock-runtime.us-west-2.amazonaws.com/model/cohere.embed-v4%3A0/invoke");
      expect(call!.body).toEqual({ texts, input_type: "search_document", ...(dimensions ? { output_dimension: dimensions } : {}) });
      expectSigned(call!);
    },
  },
];

function expectSigned(call: EmbeddingCall) {
  expect(call.headers.get("authorization")).toMatch(
    new RegExp(
      `^AWS4-HMAC-SHA256 Credential=${KEYS.awsKeyId}/\\d{8}/us-west-2/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$`,
    ),
  );
  expect(call.headers.get("x-amz-content-sha256")).toBe(createHash("sha256").update(call.raw).digest("hex"));
}

const priced = (price: number, tokens: number) => Math.ceil((tokens * price) / 1000);

let server: TestServer;
let user: Awaited<ReturnType<typeof registerUser>>;
let gatewayKey: string;
let accountKey: string;

beforeAll(async () => {
  await msw.listen();
  vi.stubEnv("EMB_OPENAI_KEY", KEYS.openai);
  vi.stubEnv("EMB_AZURE_KEY", KEYS.azure);
  vi.stubEnv("EMB_GEMINI_KEY", KEYS.gemini);
  vi.stubEnv("AWS_ACCESS_KEY_ID", KEYS.awsKeyId);
  vi.stubEnv("AWS_SECRET_ACCESS_KEY", KEYS.awsSecret);
  vi.stubEnv("AWS_SESSION_TOKEN", "");
  const models: Record<string, unknown> = {
    "echo-1": { provider: "echo" },
    "echo-embed": { provider: "echo", mode: "embedding", price: { input: 10, output: 0 } },
  };
  for (const c of CASES) models[c.id] = { ...c.entry(), mode: "embedding", price: { input: c.price, output: 0 } };
  server = await startTestServer({ MODELS_JSON: JSON.stringify({ models }) });
  user = await registerUser(server);
  const gateway = await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(user.token), json: { name: "emb" } });
  gatewayKey = gateway.body.key;
  const account = await server.request("/account/v1/keys", { method: "POST", headers: bearer(user.token), json: { name: "emb" } });
  accountKey = account.body.key;
});

afterAll(async () => {
  await msw.close();
  vi.unstubAllEnvs();
  await server?.close();
});

beforeEach(() => {
  for (const c of CASES) c.upstream.reset();
});

async function planUsed(): Promise<number> {
  return (await server.request("/account/v1/models", { headers: bearer(accountKey) })).body.plan.used as number;
}

/** The plan, the usage report and the log line all show the request's tokens, at the model's input price. */
async function expectMetered(
  requestId: string,
  model: string,
  tokens: number,
  price: number,
  before: { plan: number; requests: number; input: number },
) {
  await vi.waitFor(async () => {
    expect((await planUsed()) - before.plan).toBe(tokens);
    const row = await usageOf(server, user.token, model);
    expect(row.requests - before.requests).toBe(1);
    expect(row.inputTokens - before.input).toBe(tokens);
  });
  const line = server.logs().find((entry) => entry.clientRequestId === requestId && entry.costMicrocredits !== undefined);
  expect(line).toMatchObject({
    model,
    inputTokens: tokens,
    outputTokens: 0,
    costMicrocredits: priced(price, tokens),
    embeddings: expect.any(Number),
  });
}

async function snapshot(model: string) {
  const row = await usageOf(server, user.token, model);
  return { plan: await planUsed(), requests: row.requests, input: row.inputTokens };
}

const SURFACES = [
  ["Gateway", "/gateway/v1", () => gatewayKey],
  ["Account", "/account/v1", () => accountKey],
] as const;

for (const [surface, base, credential] of SURFACES) {
  describe(`the ${surface} API with the official openai client`, () => {
    const client = () => openaiClient(server, base, credential());
    const rid = () => ({ headers: { "x-request-id": `emb-${randomUUID()}` } });

    for (const c of CASES) {
      it(`${c.id}: base64 by default (decoded by the client) and float with dimensions, each vector at its index, metered`, async () => {
        const texts = ["alpha beta", "gamma delta epsilon"];
        let before = await snapshot(c.id);
        const options = rid();
        const { data: answer, response } = await client().embeddings.create({ model: c.id, input: texts }, options).withResponse();
        expect(response.headers.get("x-service-request-id")).toBeTruthy();
        expect(answer.object).toBe("list");
        expect(answer.model).toBe(c.id);
        expect(answer.data.map((item) => [item.object, item.index])).toEqual([
          ["embedding", 0],
          ["embedding", 1],
        ]);
        // Base64 is float32: the vectors come back as float32 values of the provider's.
        for (const [i, text] of texts.entries()) expect(answer.data[i]!.embedding).toEqual(Array.from(new Float32Array(c.vector(text))));
        expect(answer.usage).toEqual({ prompt_tokens: c.tokens(texts), total_tokens: c.tokens(texts) });
        c.expectCalls(c.upstream.calls, texts);
        await expectMetered(options.headers["x-request-id"], c.id, c.tokens(texts), c.price, before);

        c.upstream.reset();
        before = await snapshot(c.id);
        const floats = rid();
        const single = await client().embeddings.create(
          { model: c.id, input: "zeta", encoding_format: "float", dimensions: c.dimensions },
          floats,
        );
        expect(single.data).toHaveLength(1);
        const vector = single.data[0]!.embedding;
        expect(vector).toHaveLength(c.dimensions);
        for (const [i, value] of c.vector("zeta", c.dimensions).entries()) expect(vector[i]).toBeCloseTo(value, 12);
        c.expectCalls(c.upstream.calls, ["zeta"], c.dimensions, "zeta");
        await expectMetered(floats.headers["x-request-id"], c.id, c.tokens(["zeta"]), c.price, before);
      });
    }

    it("echo-embed: deterministic unit vectors, closer for texts that share words, token id input too", async () => {
      const answer = await client().embeddings.create({
        model: "echo-embed",
        input: ["the cat sat on the mat", "the cat sat on the mat", "a cat on a mat", "quarterly revenue grew"],
        encoding_format: "float",
      });
      const [a, same, near, far] = answer.data.map((item) => item.embedding);
      expect(a).toHaveLength(256);
      expect(Math.hypot(...a!)).toBeCloseTo(1, 10);
      expect(same).toEqual(a);
      expect(cosineSimilarity(a!, near!)).toBeGreaterThan(cosineSimilarity(a!, far!));
      expect(answer.usage.prompt_tokens).toBe(
        countTokens("the cat sat on the mat") * 2 + countTokens("a cat on a mat") + countTokens("quarterly revenue grew"),
      );
      // The client decodes the default base64 to the same vector, as float32.
      const decoded = await client().embeddings.create({ model: "echo-embed", input: "the cat sat on the mat", dimensions: 32 });
      expect(decoded.data[0]!.embedding).toHaveLength(32);
      const tokens = await client().embeddings.create({ model: "echo-embed", input: [[1, 2, 3], [4]], encoding_format: "float" });
      expect(tokens.data.map((item) => item.embedding.length)).toEqual([256, 256]);
      expect(tokens.usage.prompt_tokens).toBe(4);
    });

    it("fields the gateway does not read reach an OpenAI-format upstream as sent; token ids pass too", async () => {
      await client().embeddings.create({
        model: "emb-openai",
        input: [[101, 102], [103]],
        user: "end-user-7",
        // A field OpenAI-compatible servers take beside OpenAI's own (e.g. vLLM, Voyage, NVIDIA NIM).
        ...({ input_type: "query", truncate: "END" } as object),
      });
      expect(openai.calls[0]!.body).toEqual({
        model: "text-embedding-3-small",
        input: [[101, 102], [103]],
        user: "end-user-7",
        input_type: "query",
        truncate: "END",
        encoding_format: "base64",
      });
    });
  });

  describe(`the AI SDK's embed and embedMany on the ${surface} API`, () => {
    const provider = () => createOpenAI({ baseURL: server.url(base), apiKey: credential(), fetch: loopbackFetch });

    it("embed on echo, embedMany on an OpenAI-compatible and a Gemini model: vectors in order, usage the gateway metered", async () => {
      const one = await embed({ model: provider().embedding("echo-embed"), value: "sunny day at the beach" });
      expect(one.embedding).toHaveLength(256);
      expect(one.usage.tokens).toBe(countTokens("sunny day at the beach"));

      const values = ["first document", "second document", "third"];
      for (const [model, vector] of [
        ["emb-openai", (text: string) => mockVector(text, OPENAI_MOCK_DIMENSIONS)],
        ["emb-gemini", (text: string) => mockVector(text, GEMINI_MOCK_DIMENSIONS)],
      ] as const) {
        const before = await usageOf(server, user.token, model);
        const many = await embedMany({ model: provider().textEmbeddingModel(model), values });
        expect(many.embeddings).toEqual(values.map(vector));
        const after = await usageOf(server, user.token, model);
        expect(after.requests - before.requests).toBe(1);
        expect(many.usage.tokens).toBe(after.inputTokens - before.inputTokens);
      }
      // The AI SDK asks for floats.
      expect(openai.calls.at(-1)!.body.encoding_format).toBe("float");
    });
  });
}

describe("batches and order", () => {
  const client = () => openaiClient(server, "/gateway/v1", gatewayKey);

  it("150 inputs go to Gemini in calls of 100 and 100 inputs to Cohere in calls of 96, answered in the inputs' order", async () => {
    const texts = Array.from({ length: 150 }, (_, i) => `document number ${i}`);
    const geminiAnswer = await client().embeddings.create({ model: "emb-gemini", input: texts, encoding_format: "float" });
    expect(gemini.calls.map((call) => call.body.requests.length)).toEqual([100, 50]);
    expect(geminiAnswer.data.map((item) => item.embedding)).toEqual(texts.map((text) => mockVector(text, GEMINI_MOCK_DIMENSIONS)));
    const cohereTexts = texts.slice(0, 100);
    const cohereAnswer = await client().embeddings.create({
      model: "emb-cohere",
      input: cohereTexts,
      encoding_format: "float",
      dimensions: 8,
    });
    expect(bedrock.calls.map((call) => call.body.texts.length)).toEqual([96, 4]);
    expect(cohereAnswer.data.map((item) => item.embedding)).toEqual(cohereTexts.map((text) => mockVector(text, 8)));
  });

  it("Titan's calls, one per input, run a few at once and keep the inputs' order", async () => {
    const texts = Array.from({ length: 9 }, (_, i) => `passage ${i}`);
    const answer = await client().embeddings.create({ model: "emb-titan", input: texts, encoding_format: "float", dimensions: 256 });
    expect(bedrock.calls).toHaveLength(9);
    expect(answer.data.map((item) => item.embedding)).toEqual(texts.map((text) => mockVector(text, 256)));
    expect(answer.usage.prompt_tokens).toBe(providerCount(texts));
  });

  it("a client's input_type reaches Cohere, task_type reaches Gemini", async () => {
    await client().embeddings.create({ model: "emb-cohere", input: "where is it?", ...({ input_type: "search_query" } as object) });
    expect(bedrock.calls[0]!.body.input_type).toBe("search_query");
    await client().embeddings.create({ model: "emb-gemini", input: "where is it?", ...({ task_type: "RETRIEVAL_QUERY" } as object) });
    expect(gemini.calls[0]!.body.requests[0].taskType).toBe("RETRIEVAL_QUERY");
  });
});
