import { describe, expect, it } from "vitest";
import type { ToolDef, ToolResult } from "../../../rpc/tools/types.js";
import { runAgent, type AgentEvent, type RunDependencies } from "../../../rpc/agents/run.js";
import type { ChatChunk, ProviderResult } from "../../../rpc/chat/types.js";

const ADD: ToolDef = {
  name: "add",
  description: "Adds two numbers",
  inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
  category: "math",
  source: { kind: "builtin", id: "test" },
};

/** A scripted model: each turn is either text or tool calls, streamed as chunks. */
function scripted(turns: ({ text: string } | { calls: { name: string; args: string }[] })[]) {
  const requests: unknown[] = [];
  let i = 0;
  const complete: RunDependencies["complete"] = async (request) => {
    requests.push(JSON.parse(JSON.stringify(request)));
    const turn = turns[Math.min(i++, turns.length - 1)]!;
    async function* chunks(): AsyncGenerator<ChatChunk> {
      if ("text" in turn) {
        for (const word of turn.text.split(/(?= )/)) yield { choices: [{ index: 0, delta: { content: word } }] };
      } else {
        for (const [index, call] of turn.calls.entries()) {
          yield {
            choices: [
              { index: 0, delta: { tool_calls: [{ index, id: `c${index}`, function: { name: call.name, arguments: "" } }] } as never },
            ],
          };
          // Arguments arrive split across frames, as providers send them.
          const half = Math.floor(call.args.length / 2);
          yield { choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: call.args.slice(0, half) } }] } as never }] };
          yield { choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: call.args.slice(half) } }] } as never }] };
        }
      }
      yield { choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } };
    }
    return { kind: "stream", chunks: chunks() } satisfies ProviderResult;
  };
  return { complete, requests };
}

async function collect(gen: AsyncGenerator<AgentEvent>) {
  const events: AgentEvent[] = [];
  for await (const event of gen) events.push(event);
  return events;
}

const addTool = async (_name: string, args: Record<string, unknown>): Promise<ToolResult> => ({
  content: [{ type: "text", text: String(Number(args.a) + Number(args.b)) }],
});

describe("the agent loop", () => {
  it("runs tool calls, feeds results back and ends with the model's answer", async () => {
    const model = scripted([{ calls: [{ name: "add", args: '{"a":2,"b":3}' }] }, { text: "The sum is 5" }]);
    const events = await collect(
      runAgent({ complete: model.complete, callTool: addTool, tools: [ADD], maxSteps: 4, signal: new AbortController().signal }, [
        { role: "user", content: "2+3?" },
      ]),
    );
    const done = events.at(-1) as Extract<AgentEvent, { type: "done" }>;
    expect(events[0]).toEqual({ type: "status", status: "running" });
    expect(done.result).toMatchObject({ status: "completed", output: "The sum is 5", usage: { total_tokens: 30 } });
    expect(done.result.steps).toEqual([
      expect.objectContaining({ tool: "add", arguments: { a: 2, b: 3 }, error: null, result: { content: [{ type: "text", text: "5" }] } }),
    ]);
    expect(
      events
        .filter((e) => e.type === "chunk")
        .map((e) => (e as { content: string }).content)
        .join(""),
    ).toBe("The sum is 5");
    const second = model.requests[1] as { messages: any[]; tools: any[] };
    expect(second.tools[0].function).toMatchObject({ name: "add", parameters: ADD.inputSchema });
    expect(second.messages.at(-2)).toMatchObject({
      role: "assistant",
      tool_calls: [{ id: "c0", function: { name: "add", arguments: '{"a":2,"b":3}' } }],
    });
    expect(second.messages.at(-1)).toEqual({ role: "tool", tool_call_id: "c0", content: "5" });
  });

  it("records tool failures in the step and lets the model see them", async () => {
    const model = scripted([
      {
        calls: [
          { name: "add", args: '{"a":"x"}' },
          { name: "nope", args: "{}" },
          { name: "add", args: "{bad" },
          { name: "add", args: '{"a":1,"b":1}' },
        ],
      },
      { text: "gave up" },
    ]);
    const failing = async (): Promise<ToolResult> => {
      throw new Error("boom");
    };
    const events = await collect(
      runAgent({ complete: model.complete, callTool: failing, tools: [ADD], maxSteps: 3, signal: new AbortController().signal }, [
        { role: "user", content: "go" },
      ]),
    );
    const result = (events.at(-1) as Extract<AgentEvent, { type: "done" }>).result;
    expect(result.status).toBe("completed");
    expect(result.steps.map((s) => s.error)).toEqual([
      expect.stringContaining("Invalid arguments"),
      expect.stringContaining("Unknown tool: nope"),
      "The arguments are not valid JSON",
      "Internal error",
    ]);
    const toolMessages = (model.requests[1] as { messages: any[] }).messages.filter((m) => m.role === "tool");
    expect(toolMessages).toHaveLength(4);
    expect(toolMessages.every((m) => m.content.startsWith("Error: "))).toBe(true);
  });

  it("stops a model that keeps calling tools at maxSteps with a clear status", async () => {
    const model = scripted([{ calls: [{ name: "add", args: '{"a":1,"b":1}' }] }]);
    const events = await collect(
      runAgent({ complete: model.complete, callTool: addTool, tools: [ADD], maxSteps: 2, signal: new AbortController().signal }, [
        { role: "user", content: "loop" },
      ]),
    );
    const result = (events.at(-1) as Extract<AgentEvent, { type: "done" }>).result;
    expect(result.status).toBe("max_steps");
    expect(result.steps).toHaveLength(2);
    expect(model.requests).toHaveLength(3);
  });

  it("ends with an error status when the model fails, and cancelled when aborted", async () => {
    const failing: RunDependencies["complete"] = async () => {
      throw new Error("upstream down");
    };
    const events = await collect(
      runAgent({ complete: failing, callTool: addTool, tools: [], maxSteps: 2, signal: new AbortController().signal }, [
        { role: "user", content: "x" },
      ]),
    );
    expect((events.at(-1) as Extract<AgentEvent, { type: "done" }>).result).toMatchObject({ status: "error", error: "Internal error" });

    const abort = new AbortController();
    abort.abort();
    const model = scripted([{ text: "never" }]);
    const cancelled = await collect(
      runAgent({ complete: model.complete, callTool: addTool, tools: [], maxSteps: 2, signal: abort.signal }, [
        { role: "user", content: "x" },
      ]),
    );
    expect((cancelled.at(-1) as Extract<AgentEvent, { type: "done" }>).result.status).toBe("cancelled");
    expect(model.requests).toHaveLength(0);
  });
});
