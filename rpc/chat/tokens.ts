import type { ChatMessage, Usage } from "./types.js";

// A deterministic word-piece count: runs of letters or digits, and every other visible
// character, count as one token each. The echo model reports it as its real count; for an
// upstream that sent no usage (a dropped stream) it is the estimate that gets billed.
const TOKEN = /[\p{L}\p{N}]+|[^\s\p{L}\p{N}]/gu;

export function countTokens(text: string): number {
  return text.match(TOKEN)?.length ?? 0;
}

export function contentText(content: ChatMessage["content"]): string {
  if (typeof content === "string") return content;
  if (!content) return "";
  return content.map((part) => (typeof part.text === "string" ? part.text : "")).join(" ");
}

/** Per message: its role, its content, and 3 tokens of framing (the usual chat overhead). */
export function countPromptTokens(messages: readonly ChatMessage[]): number {
  let total = 3;
  for (const message of messages) total += 3 + countTokens(message.role) + countTokens(contentText(message.content));
  return total;
}

/**
 * The tokens of a request's input as admission counts them before any model runs (docs/billing.md
 * "Admission"): its messages plus its tool definitions, as `count_tokens` counts them.
 */
export function countInputTokens(messages: readonly ChatMessage[], tools?: readonly unknown[]): number {
  return countPromptTokens(messages) + (tools?.length ? countTokens(JSON.stringify(tools)) : 0);
}

export function usageOf(promptTokens: number, completionTokens: number): Usage {
  return { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
}
