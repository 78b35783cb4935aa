import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError } from "../../../rpc/config.js";
import { loadModels } from "../../../rpc/chat/models-config.js";
import { ModelRouter } from "../../../rpc/chat/model-router.js";
import { startTestServer } from "../../helpers/server.js";
import { openaiClient, platformAccount } from "../../helpers/chat.js";

/** The models document (docs/models-and-chat.md): MODELS_FILE, MODELS_JSON, validation, router. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "gw-models-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const problems = (fn: () => unknown): string[] => {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error("expected a ConfigError");
};

describe("loadModels", () => {
  it("reads MODELS_FILE, lets MODELS_JSON override its ids, and fills defaults", async () => {
    const file = join(dir, "models.json");
    await writeFile(
      file,
      JSON.stringify({ models: { a: { provider: "echo" }, b: { provider: "openai-compatible", baseURL: "http://x.test/v1" } } }),
    );
    const models = loadModels({
      MODELS_FILE: file,
      MODELS_JSON: JSON.stringify({ models: { b: { provider: "echo", contextWindow: 10 } } }),
    });
    expect(Object.keys(models).sort()).toEqual(["a", "b"]);
    expect(models.b).toEqual({ provider: "echo", contextWindow: 10, public: true, price: { input: 1000, output: 2000 } });
    expect(models.a).toMatchObject({ contextWindow: 8192, public: true });
  });

  it("stops the start with a message naming the bad field", async () => {
    expect(problems(() => loadModels({ MODELS_JSON: "{nope" }))[0]).toMatch(/MODELS_JSON: not valid JSON/);
    expect(problems(() => loadModels({ MODELS_JSON: JSON.stringify({ models: { a: { provider: "magic" } } }) }))[0]).toMatch(
      /provider must be one of "echo", "openai-compatible", "azure-openai", "anthropic", "gemini", "bedrock"/,
    );
    expect(
      problems(() =>
        loadModels({ MODELS_JSON: JSON.stringify({ models: { a: { provider: "openai-compatible", baseURL: "not a url" } } }) }),
      )[0],
    ).toMatch(/models\.a\.baseURL: must be an absolute URL/);
    expect(
      problems(() =>
        loadModels({
          MODELS_JSON: JSON.stringify({
            models: { a: { provider: "openai-compatible", baseURL: "http://x.test", apiKeyEnv: "sk-the-key-itself" } },
          }),
        }),
      )[0],
    ).toMatch(/apiKeyEnv: must be an environment variable name/);
    expect(
      problems(() =>
        loadModels({ MODELS_JSON: JSON.stringify({ models: { a: { provider: "echo", price: { input: -1, output: 0 } } } }) }),
      )[0],
    ).toMatch(/price\.input/);
    expect(problems(() => loadModels({ MODELS_JSON: JSON.stringify({ models: { "bad id!": { provider: "echo" } } }) })).join()).toMatch(
      /model ids are/,
    );
    expect(problems(() => loadModels({ MODELS_FILE: join(dir, "missing.json") }))[0]).toMatch(/cannot be read \(ENOENT\)/);
  });

  it("takes one entry per provider with its own fields and defaults (docs/providers.md)", () => {
    const models = loadModels({
      MODELS_JSON: JSON.stringify({
        models: {
          azure: {
            provider: "azure-openai",
            baseURL: "https://res.openai.azure.com",
            apiKeyEnv: "AZURE_OPENAI_API_KEY",
            upstreamModel: "gpt4o-deployment",
          },
          claude: { provider: "anthropic", apiKeyEnv: "ANTHROPIC_API_KEY", upstreamModel: "claude-sonnet-4-5" },
          flash: { provider: "gemini", apiKeyEnv: "GEMINI_API_KEY", upstreamModel: "gemini-2.5-flash" },
          nova: { provider: "bedrock", region: "eu-central-1", upstreamModel: "amazon.nova-pro-v1:0", timeoutSeconds: 20 },
        },
      }),
    });
    expect(models.azure).toMatchObject({ apiVersion: "2024-10-21" });
    expect(models.claude).toMatchObject({ baseURL: "https://api.anthropic.com" });
    expect(models.flash).toMatchObject({ baseURL: "https://generativelanguage.googleapis.com/v1beta" });
    expect(models.nova).toMatchObject({ region: "eu-central-1", timeoutSeconds: 20 });
    expect(models.nova).not.toHaveProperty("baseURL");
  });

  it("names the bad field of a provider entry", () => {
    const bad = (entry: Record<string, unknown>) =>
      problems(() => loadModels({ MODELS_JSON: JSON.stringify({ models: { m: entry } }) })).join("; ");
    expect(bad({ provider: "azure-openai", apiKeyEnv: "K" })).toMatch(/models\.m\.baseURL/);
    expect(bad({ provider: "azure-openai", baseURL: "https://r.openai.azure.com", apiVersion: "latest" })).toMatch(
      /models\.m\.apiVersion: must be a date/,
    );
    expect(bad({ provider: "anthropic", baseURL: "ftp://api.anthropic.com" })).toMatch(/models\.m\.baseURL: must be an http\(s\) URL/);
    expect(bad({ provider: "bedrock", region: "Frankfurt" })).toMatch(/models\.m\.region: must be an AWS region/);
    // Bedrock signs with the AWS credentials of the environment: a key variable is refused, not ignored.
    expect(bad({ provider: "bedrock", region: "us-east-1", apiKeyEnv: "AWS_SECRET_ACCESS_KEY" })).toMatch(/apiKeyEnv/);
    expect(bad({ provider: "gemini", region: "us-east-1" })).toMatch(/region/);
  });

  it("refuses to start a server with a bad document", async () => {
    await expect(
      startTestServer({ MODELS_JSON: JSON.stringify({ models: { a: { provider: "echo", extra: 1 } } }) }),
    ).rejects.toBeInstanceOf(ConfigError);
  });
});

describe("ModelRouter", () => {
  const router = new ModelRouter(
    loadModels({
      MODELS_JSON: JSON.stringify({
        models: {
          open: { provider: "echo", price: { input: 1500, output: 2500 } },
          closed: { provider: "echo", public: false },
          pro: { provider: "echo", plans: ["pro"] },
        },
      }),
    }),
    { MODEL_TIMEOUT_SECONDS: 60 },
    {},
  );

  it("lists every model and names only public ones usable", () => {
    expect(router.list().map((entry) => entry.id)).toEqual(["open", "closed", "pro"]);
    expect(router.usableIds()).toEqual(["open", "pro"]);
    expect(router.usableIds("free")).toEqual(["open"]);
    expect(() => router.resolve("closed", [])).toThrow(/Usable models: open, pro/);
    expect(() => router.resolve("pro", [], "free")).toThrow(/Usable models: open$/);
  });

  it("prices usage per 1,000 tokens in micro-credits, rounded up", () => {
    const model = router.resolve("open", []);
    expect(router.cost(model, { prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 })).toBe(4000);
    expect(router.cost(model, { prompt_tokens: 1, completion_tokens: 0, total_tokens: 1 })).toBe(2);
    expect(router.cost(model, { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 })).toBe(0);
  });

  it("serves a MODELS_FILE through the Platform catalog", async () => {
    const file = join(dir, "served.json");
    await writeFile(file, JSON.stringify({ models: { "from-file": { provider: "echo", contextWindow: 321 } } }));
    const server = await startTestServer({ MODELS_FILE: file });
    try {
      const account = await platformAccount(server);
      const list = await openaiClient(server, "/api/v1", account.key).models.list();
      expect(list.data).toEqual([expect.objectContaining({ id: "from-file", object: "model", context_window: 321 })]);
    } finally {
      await server.close();
    }
  });
});

describe("mode: chat and embedding models (docs/embeddings.md)", () => {
  const load = (models: Record<string, unknown>) => loadModels({ MODELS_JSON: JSON.stringify({ models }) });

  it("reads mode, chat when absent, and refuses another value", () => {
    const models = load({ c: { provider: "echo" }, e: { provider: "echo", mode: "embedding" } });
    expect(models.c!.mode).toBeUndefined();
    expect(models.e!.mode).toBe("embedding");
    expect(problems(() => load({ e: { provider: "echo", mode: "rerank" } }))).toEqual([
      'MODELS_JSON: models.e.mode: mode must be "chat" or "embedding"',
    ]);
  });

  it("refuses an embedding model its provider cannot serve, and fallbacks of the other mode", () => {
    expect(
      problems(() =>
        load({
          a: { provider: "anthropic", mode: "embedding" },
          b: { provider: "bedrock", region: "us-east-1", mode: "embedding", upstreamModel: "amazon.nova-pro-v1:0" },
          d: {
            mode: "embedding",
            deployments: [
              { provider: "echo" },
              { provider: "bedrock", region: "us-east-1", upstreamModel: "us.cohere.embed-v4:0" },
              { provider: "anthropic" },
            ],
          },
          chat: { provider: "echo", fallbacks: ["d"] },
        }),
      ),
    ).toEqual([
      "models.a.provider: anthropic has no embeddings API (embedding models use echo, openai-compatible, azure-openai, gemini, bedrock)",
      "models.b.upstreamModel: an embedding model on bedrock is Titan Text Embeddings (amazon.titan-embed-text-…) or Cohere Embed (cohere.embed-…), not 'amazon.nova-pro-v1:0'",
      "models.d.deployments.2.provider: anthropic has no embeddings API (embedding models use echo, openai-compatible, azure-openai, gemini, bedrock)",
      "models.chat.fallbacks: 'd' has mode embedding, 'chat' has mode chat",
    ]);
  });

  it("resolves each model for its own mode only: 400 naming it and the usable ids of the right mode", () => {
    const router = new ModelRouter(
      {
        chat: { provider: "echo", contextWindow: 8192, public: true, price: { input: 1, output: 1 } },
        emb: { provider: "echo", mode: "embedding", contextWindow: 8192, public: true, price: { input: 1, output: 0 } },
      },
      { MODEL_TIMEOUT_SECONDS: 60 },
      {},
    );
    expect(router.resolve("emb", [], undefined, "embedding").id).toBe("emb");
    expect(() => router.resolve("emb", [])).toThrow(
      "The model 'emb' is an embedding model, not a chat model (embeddings: POST /embeddings on the Account and Gateway APIs). Chat models: chat",
    );
    expect(() => router.resolve("chat", [], undefined, "embedding")).toThrow(
      "The model 'chat' is a chat model, not an embedding model. Embedding models: emb",
    );
    expect(() => router.resolve("nope", [], undefined, "embedding")).toThrow(/Usable models: emb$/);
    expect(router.usableIds()).toEqual(["chat", "emb"]);
  });
});
