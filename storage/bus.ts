import { EventEmitter } from "node:events";
import type { Redis } from "ioredis";

export type BusHandler = (message: unknown) => void;

/**
 * Pub/sub between the parts of the service and, with Redis, between instances: tool calls
 * for a VM on another instance, agent stream frames, catalog changes.
 */
export interface Bus {
  publish(channel: string, message: unknown): Promise<void>;
  /** Resolves once the subscription is live; returns the unsubscribe function. */
  subscribe(channel: string, handler: BusHandler): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export class MemoryBus implements Bus {
  readonly #emitter = new EventEmitter().setMaxListeners(0);

  async publish(channel: string, message: unknown) {
    // Delivered on a later tick, as Redis would: a publisher never runs subscribers inline.
    const copy = JSON.parse(JSON.stringify(message ?? null));
    queueMicrotask(() => this.#emitter.emit(channel, copy));
  }

  async subscribe(channel: string, handler: BusHandler) {
    this.#emitter.on(channel, handler);
    return async () => {
      this.#emitter.off(channel, handler);
    };
  }

  async close() {
    this.#emitter.removeAllListeners();
  }
}

export class RedisBus implements Bus {
  readonly #pub: Redis;
  readonly #sub: Redis;
  readonly #prefix: string;
  readonly #handlers = new Map<string, Set<BusHandler>>();

  constructor(pub: Redis, sub: Redis, prefix: string) {
    this.#pub = pub;
    this.#sub = sub;
    this.#prefix = `${prefix}:bus:`;
    this.#sub.on("message", (channel: string, raw: string) => {
      const handlers = this.#handlers.get(channel);
      if (!handlers) return;
      let message: unknown;
      try {
        message = JSON.parse(raw);
      } catch {
        return;
      }
      for (const handler of handlers) handler(message);
    });
  }

  async publish(channel: string, message: unknown) {
    await this.#pub.publish(this.#prefix + channel, JSON.stringify(message ?? null));
  }

  async subscribe(channel: string, handler: BusHandler) {
    const full = this.#prefix + channel;
    let handlers = this.#handlers.get(full);
    if (!handlers) {
      handlers = new Set();
      this.#handlers.set(full, handlers);
      await this.#sub.subscribe(full);
    }
    handlers.add(handler);
    return async () => {
      const set = this.#handlers.get(full);
      if (!set?.delete(handler) || set.size > 0) return;
      this.#handlers.delete(full);
      await this.#sub.unsubscribe(full).catch(() => undefined);
    };
  }

  async close() {
    this.#handlers.clear();
  }
}
