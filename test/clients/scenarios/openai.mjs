// The official `openai` package (docs/clients.md): chat completions and the Responses API,
// plain, streamed, with a function tool round trip and with a zod schema (`.parse`), and
// embeddings. Input: {baseURL (the surface root, without /v1), apiKey, model, embeddingModel?}.
import OpenAI from "openai";
import { zodResponseFormat, zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import { run, WEATHER_TOOL, weatherIn } from "./run.mjs";

const Weather = z.object({ city: z.string(), temperature: z.number(), conditions: z.enum(["sunny", "cloudy", "rain"]) });

await run("openai", ["openai", "zod"], (input) => {
  const client = new OpenAI({ baseURL: `${input.baseURL}/v1`, apiKey: input.apiKey, maxRetries: 0 });
  const model = input.model;
  const ask = [{ role: "user", content: input.prompt }];
  return {
    async chat() {
      const completion = await client.chat.completions.create({ model, messages: ask });
      return {
        text: completion.choices[0].message.content,
        finishReason: completion.choices[0].finish_reason,
        usage: completion.usage,
        requestId: completion._request_id,
      };
    },
    async "chat-stream"() {
      const stream = await client.chat.completions.create({ model, messages: ask, stream: true, stream_options: { include_usage: true } });
      let text = "";
      let usage;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? "";
        usage = chunk.usage ?? usage;
      }
      return { text, usage };
    },
    async "chat-tools"() {
      const tools = [{ type: "function", function: WEATHER_TOOL }];
      const messages = [{ role: "user", content: input.toolPrompt }];
      const first = await client.chat.completions.create({ model, messages, tools });
      const calls = first.choices[0].message.tool_calls ?? [];
      if (!calls.length) throw new Error(`No tool call: ${JSON.stringify(first.choices[0].message)}`);
      messages.push(first.choices[0].message);
      for (const call of calls)
        messages.push({ role: "tool", tool_call_id: call.id, content: weatherIn(JSON.parse(call.function.arguments).city) });
      const second = await client.chat.completions.create({ model, messages, tools });
      return { toolCalls: calls.map((call) => call.function.name), text: second.choices[0].message.content };
    },
    async "chat-parse"() {
      const completion = await client.chat.completions.parse({
        model,
        messages: [{ role: "user", content: input.objectPrompt }],
        response_format: zodResponseFormat(Weather, "weather"),
      });
      return { parsed: completion.choices[0].message.parsed };
    },
    async responses() {
      const response = await client.responses.create({ model, input: input.prompt });
      return { text: response.output_text, status: response.status, usage: response.usage, requestId: response._request_id };
    },
    async "responses-stream"() {
      const stream = await client.responses.create({ model, input: input.prompt, stream: true });
      let text = "";
      let completed;
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") text += event.delta;
        if (event.type === "response.completed") completed = event.response;
      }
      return { text, status: completed?.status, usage: completed?.usage };
    },
    async "responses-tools"() {
      const tools = [{ type: "function", ...WEATHER_TOOL, strict: true }];
      const conversation = [{ role: "user", content: input.toolPrompt }];
      const first = await client.responses.create({ model, input: conversation, tools });
      const calls = first.output.filter((item) => item.type === "function_call");
      if (!calls.length) throw new Error(`No function call: ${JSON.stringify(first.output)}`);
      conversation.push(...first.output);
      for (const call of calls)
        conversation.push({ type: "function_call_output", call_id: call.call_id, output: weatherIn(JSON.parse(call.arguments).city) });
      const second = await client.responses.create({ model, input: conversation, tools });
      return { toolCalls: calls.map((call) => call.name), text: second.output_text };
    },
    async "responses-parse"() {
      const response = await client.responses.parse({
        model,
        input: input.objectPrompt,
        text: { format: zodTextFormat(Weather, "weather") },
      });
      return { parsed: response.output_parsed };
    },
    async embeddings() {
      const result = await client.embeddings.create({
        model: input.embeddingModel ?? model,
        input: ["The quick brown fox", "jumps over the lazy dog"],
      });
      return { count: result.data.length, dimensions: result.data[0]?.embedding.length, usage: result.usage };
    },
  };
});
