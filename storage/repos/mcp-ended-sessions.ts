import type { Atomic } from "../atomic.js";

/**
 * MCP sessions ended with DELETE (docs/mcp.md "Sessions on any instance"), by the random nonce
 * their id carries, each kept until the id would have expired anyway: every instance refuses
 * them afterwards.
 */
export class McpEndedSessionsRepo {
  readonly #atomic: Atomic;

  constructor(atomic: Atomic) {
    this.#atomic = atomic;
  }

  async isEnded(nonce: string): Promise<boolean> {
    return Boolean(await this.#atomic.get(`mcp-session-ended:${nonce}`));
  }

  async end(nonce: string, ttlMs: number): Promise<void> {
    await this.#atomic.setIfAbsent(`mcp-session-ended:${nonce}`, "1", Math.max(1000, ttlMs));
  }
}
