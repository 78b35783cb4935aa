// The AI SDK (`ai` with @ai-sdk/openai, @ai-sdk/anthropic and @ai-sdk/openai-compatible;
// docs/clients.md) on four providers: `responses` (the default `openai(id)`, the Responses
// API), `chat` (`openai.chat(id)`), `anthropic` and `compatible` (chat completions). For each:
// `-text` (generateText), `-stream` (streamText), `-tools` (a tool with `execute`, two steps) and
// `-object` (generateObject with a zod schema); `-output` (generateText with `Output.object`, the
// SDK 7 form) on the OpenAI providers; `embed` and `embed-many`.
// Input: {baseURL (the surface root, without /v1), apiKey, model, embeddingModel?}.
import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { embed, embedMany, generateObject, generateText, Output, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";
import { run, WEATHER_TOOL, weatherIn } from "./run.mjs";

const Weather = z.object({ city: z.string(), temperature: z.number(), conditions: z.enum(["sunny", "cloudy", "rain"]) });

await run("ai-sdk", ["ai", "@ai-sdk/openai", "@ai-sdk/anthropic", "@ai-sdk/openai-compatible", "zod"], (input) => {
  const openai = createOpenAI({ baseURL: `${input.baseURL}/v1`, apiKey: input.apiKey });
  const anthropic = createAnthropic({ baseURL: `${input.baseURL}/v1`, apiKey: input.apiKey });
  const compatible = createOpenAICompatible({ name: "gateway", baseURL: `${input.baseURL}/v1`, apiKey: input.apiKey, includeUsage: true });
  const providers = {
    responses: () => openai(input.model),
    chat: () => openai.chat(input.model),
    anthropic: () => anthropic(input.model),
    compatible: () => compatible(input.model),
  };
  // docs/dialects.md "The AI SDK": a stateless service needs the items themselves, not references to stored ones.
  const stateless = { openai: { store: false } };
  const weather = tool({
    description: WEATHER_TOOL.description,
    inputSchema: z.object({ city: z.string().describe("The city") }),
    execute: async ({ city }) => weatherIn(city),
  });
  const scenarios = {};
  for (const [name, model] of Object.entries(providers)) {
    scenarios[`${name}-text`] = async () => {
      const result = await generateText({ model: model(), prompt: input.prompt, maxRetries: 0 });
      return { text: result.text, finishReason: result.finishReason, usage: result.usage };
    };
    scenarios[`${name}-stream`] = async () => {
      const result = streamText({ model: model(), prompt: input.prompt, maxRetries: 0 });
      let text = "";
      for await (const delta of result.textStream) text += delta;
      return { text, finishReason: await result.finishReason, usage: await result.usage };
    };
    scenarios[`${name}-tools`] = async () => {
      const result = await generateText({
        model: model(),
        prompt: input.toolPrompt,
        tools: { [WEATHER_TOOL.name]: weather },
        stopWhen: stepCountIs(3),
        providerOptions: stateless,
        maxRetries: 0,
      });
      return {
        steps: result.steps.length,
        toolCalls: result.steps.flatMap((step) => step.toolCalls.map((call) => call.toolName)),
        text: result.text,
      };
    };
    scenarios[`${name}-object`] = async () => {
      const result = await generateObject({ model: model(), schema: Weather, prompt: input.objectPrompt, maxRetries: 0 });
      return { object: result.object };
    };
  }
  for (const name of ["responses", "chat"])
    scenarios[`${name}-output`] = async () => {
      const result = await generateText({
        model: providers[name](),
        output: Output.object({ schema: Weather }),
        prompt: input.objectPrompt,
        maxRetries: 0,
      });
      return { object: result.output };
    };
  const embedder = () => openai.embedding(input.embeddingModel ?? input.model);
  scenarios.embed = async () => {
    const result = await embed({ model: embedder(), value: "The quick brown fox", maxRetries: 0 });
    return { dimensions: result.embedding.length, usage: result.usage };
  };
  scenarios["embed-many"] = async () => {
    const result = await embedMany({ model: embedder(), values: ["The quick brown fox", "jumps over the lazy dog"], maxRetries: 0 });
    return { count: result.embeddings.length, dimensions: result.embeddings[0]?.length, usage: result.usage };
  };
  return scenarios;
});
