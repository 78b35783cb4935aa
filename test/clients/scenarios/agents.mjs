// The OpenAI Agents SDK (@openai/agents; docs/clients.md) on the Responses API (its
// default model) and on chat completions (OpenAIChatCompletionsModel): `-run` (text), `-tools`
// (a function tool the runner calls, then the final answer), `-output` (`outputType` with a zod
// schema) and `-stream` (a streamed run). Tracing is off: it would export to OpenAI.
// Input: {baseURL (the surface root, without /v1), apiKey, model}.
import { Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, run as runAgent, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";
import { run, WEATHER_TOOL, weatherIn } from "./run.mjs";

const Weather = z.object({ city: z.string(), temperature: z.number(), conditions: z.enum(["sunny", "cloudy", "rain"]) });
setTracingDisabled(true);

await run("openai-agents", ["@openai/agents", "openai", "zod"], (input) => {
  const client = new OpenAI({ baseURL: `${input.baseURL}/v1`, apiKey: input.apiKey, maxRetries: 0 });
  const models = {
    responses: () => new OpenAIResponsesModel(client, input.model),
    chat: () => new OpenAIChatCompletionsModel(client, input.model),
  };
  const weather = tool({
    name: WEATHER_TOOL.name,
    description: WEATHER_TOOL.description,
    parameters: z.object({ city: z.string().describe("The city") }),
    execute: async ({ city }) => weatherIn(city),
  });
  const scenarios = {};
  for (const [name, model] of Object.entries(models)) {
    const agent = (extra = {}) => new Agent({ name: "Assistant", instructions: "You are a helpful assistant.", model: model(), ...extra });
    scenarios[`${name}-run`] = async () => {
      const result = await runAgent(agent(), input.prompt);
      return { finalOutput: result.finalOutput };
    };
    scenarios[`${name}-tools`] = async () => {
      const result = await runAgent(agent({ tools: [weather] }), input.toolPrompt, { maxTurns: 3 });
      const calls = result.newItems.filter((item) => item.type === "tool_call_item").map((item) => item.rawItem.name);
      return { toolCalls: calls, finalOutput: result.finalOutput };
    };
    scenarios[`${name}-output`] = async () => {
      const result = await runAgent(agent({ outputType: Weather }), input.objectPrompt);
      return { finalOutput: result.finalOutput };
    };
    scenarios[`${name}-stream`] = async () => {
      const result = await runAgent(agent(), input.prompt, { stream: true });
      let text = "";
      for await (const delta of result.toTextStream()) text += delta;
      await result.completed;
      return { text, finalOutput: result.finalOutput };
    };
  }
  return scenarios;
});
