// The official `@anthropic-ai/sdk` (docs/clients.md): `messages.create`, `messages.stream`
// (both with the request id the SDK reads from the answer's `request-id` header), a tool round
// trip, `messages.parse` with a zod schema (`output_config.format`) and `countTokens`.
// Input: {baseURL (the surface root: the SDK appends /v1/messages), apiKey, model,
// auth?: "apiKey" (x-api-key, the default) | "authToken" (Authorization: Bearer)}.
import Anthropic from "@anthropic-ai/sdk";
import { zodOutputFormat } from "@anthropic-ai/sdk/helpers/zod";
import { z } from "zod";
import { run, WEATHER_TOOL, weatherIn } from "./run.mjs";

const Weather = z.object({ city: z.string(), temperature: z.number(), conditions: z.enum(["sunny", "cloudy", "rain"]) });
const textOf = (message) =>
  message.content
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("");

await run("anthropic-sdk", ["@anthropic-ai/sdk", "zod"], (input) => {
  const credentials = input.auth === "authToken" ? { authToken: input.apiKey, apiKey: null } : { apiKey: input.apiKey };
  const client = new Anthropic({ baseURL: input.baseURL, ...credentials, maxRetries: 0 });
  const model = input.model;
  const ask = [{ role: "user", content: input.prompt }];
  return {
    async messages() {
      const message = await client.messages.create({ model, max_tokens: 256, messages: ask });
      return { text: textOf(message), stopReason: message.stop_reason, usage: message.usage, requestId: message._request_id };
    },
    async "messages-stream"() {
      const stream = client.messages.stream({ model, max_tokens: 256, messages: ask });
      let text = "";
      let startUsage;
      stream.on("streamEvent", (event) => {
        if (event.type === "message_start") startUsage = event.message.usage;
      });
      stream.on("text", (delta) => (text += delta));
      const message = await stream.finalMessage();
      return { text, startUsage, usage: message.usage, stopReason: message.stop_reason, requestId: stream.request_id };
    },
    async "messages-tools"() {
      const tools = [{ name: WEATHER_TOOL.name, description: WEATHER_TOOL.description, input_schema: WEATHER_TOOL.parameters }];
      const messages = [{ role: "user", content: input.toolPrompt }];
      const first = await client.messages.create({ model, max_tokens: 256, messages, tools });
      const calls = first.content.filter((block) => block.type === "tool_use");
      if (!calls.length) throw new Error(`No tool_use: ${JSON.stringify(first.content)}`);
      messages.push({ role: "assistant", content: first.content });
      messages.push({
        role: "user",
        content: calls.map((call) => ({ type: "tool_result", tool_use_id: call.id, content: weatherIn(call.input.city) })),
      });
      const second = await client.messages.create({ model, max_tokens: 256, messages, tools });
      return { toolCalls: calls.map((call) => call.name), stopReasons: [first.stop_reason, second.stop_reason], text: textOf(second) };
    },
    async "messages-parse"() {
      const message = await client.messages.parse({
        model,
        max_tokens: 256,
        messages: [{ role: "user", content: input.objectPrompt }],
        output_config: { format: zodOutputFormat(Weather) },
      });
      return { parsed: message.parsed_output };
    },
    async "count-tokens"() {
      const count = await client.messages.countTokens({ model, messages: ask });
      return { inputTokens: count.input_tokens };
    },
  };
});
