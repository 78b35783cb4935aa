// LangChain (@langchain/openai, @langchain/anthropic, @langchain/core; docs/clients.md):
// ChatOpenAI (chat completions, and the Responses API with `useResponsesApi`) and ChatAnthropic,
// each `-invoke`, `-stream`, `-tools` (bindTools, the tool run, its ToolMessage sent back) and
// `-structured` (`withStructuredOutput` with a zod schema, each class's default method);
// `embeddings` (OpenAIEmbeddings).
// Input: {baseURL (the surface root, without /v1), apiKey, model, embeddingModel?}.
import { ChatAnthropic } from "@langchain/anthropic";
import { HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { z } from "zod";
import { run, WEATHER_TOOL, weatherIn } from "./run.mjs";

const Weather = z.object({ city: z.string(), temperature: z.number(), conditions: z.enum(["sunny", "cloudy", "rain"]) });
const textOf = (message) =>
  typeof message.content === "string" ? message.content : message.content.map((part) => part.text ?? "").join("");

await run("langchain", ["@langchain/openai", "@langchain/anthropic", "@langchain/core", "zod"], (input) => {
  const openaiOptions = { model: input.model, apiKey: input.apiKey, configuration: { baseURL: `${input.baseURL}/v1` }, maxRetries: 0 };
  const models = {
    openai: () => new ChatOpenAI(openaiOptions),
    responses: () => new ChatOpenAI({ ...openaiOptions, useResponsesApi: true }),
    anthropic: () => new ChatAnthropic({ model: input.model, apiKey: input.apiKey, anthropicApiUrl: input.baseURL, maxRetries: 0 }),
  };
  const weather = tool(async ({ city }) => weatherIn(city), {
    name: WEATHER_TOOL.name,
    description: WEATHER_TOOL.description,
    schema: z.object({ city: z.string().describe("The city") }),
  });
  const scenarios = {};
  for (const [name, model] of Object.entries(models)) {
    scenarios[`${name}-invoke`] = async () => {
      const message = await model().invoke(input.prompt);
      return { text: textOf(message), usage: message.usage_metadata };
    };
    scenarios[`${name}-stream`] = async () => {
      let text = "";
      for await (const chunk of await model().stream(input.prompt)) text += textOf(chunk);
      return { text };
    };
    scenarios[`${name}-tools`] = async () => {
      const bound = model().bindTools([weather]);
      const messages = [new HumanMessage(input.toolPrompt)];
      const first = await bound.invoke(messages);
      if (!first.tool_calls?.length) throw new Error(`No tool call: ${JSON.stringify(first.content)}`);
      messages.push(first);
      for (const call of first.tool_calls)
        messages.push(new ToolMessage({ tool_call_id: call.id, content: await weather.func(call.args) }));
      const second = await bound.invoke(messages);
      return { toolCalls: first.tool_calls.map((call) => call.name), text: textOf(second) };
    };
    scenarios[`${name}-structured`] = async () => {
      const parsed = await model().withStructuredOutput(Weather, { name: "weather" }).invoke(input.objectPrompt);
      return { parsed };
    };
  }
  scenarios.embeddings = async () => {
    const embeddings = new OpenAIEmbeddings({
      model: input.embeddingModel ?? input.model,
      apiKey: input.apiKey,
      configuration: { baseURL: `${input.baseURL}/v1` },
      maxRetries: 0,
    });
    const vectors = await embeddings.embedDocuments(["The quick brown fox", "jumps over the lazy dog"]);
    return { count: vectors.length, dimensions: vectors[0]?.length };
  };
  return scenarios;
});
