/** Event-loop lag (ms) above which the queue halves how many tasks it runs at once. */
const LAG_HIGH_MS = 3;
/** Lag below which it runs one more at once, up to `total`. */
const LAG_LOW_MS = 1;
const SAMPLE_MS = 10;

/**
 * Runs tasks at most `total` at a time, at most `perTenant` of one tenant at a time, taking
 * tenants in turn (round robin): one tenant's backlog of thousands of deliveries delays only
 * that tenant's own (docs/webhooks.md "Fair delivery").
 *
 * Background work must also not slow the requests the instance serves: while tasks wait, the
 * queue samples the event loop's lag every 10 ms and runs fewer at once when it grows (halved
 * above 3 ms, one more below 1 ms: additive increase, multiplicative decrease), at least one.
 */
export class FairQueue {
  readonly #total: number;
  /** How many may run at once now (1…total), set by the lag samples. */
  #limit: number;
  #sampler: NodeJS.Timeout | undefined;
  #sampledAt = 0;
  readonly #perTenant: number;
  readonly #tenants = new Map<string, { waiting: (() => Promise<void>)[]; running: number }>();
  /** Tenants in turn order; the next turn starts after the last one served. */
  #order: string[] = [];
  #next = 0;
  #running = 0;

  constructor(total: number, perTenant: number) {
    this.#total = Math.max(1, total);
    this.#perTenant = Math.max(1, Math.min(perTenant, this.#total));
    this.#limit = this.#total;
  }

  /** How many tasks may run at once at this moment (for metrics and tests). */
  get limit(): number {
    return this.#limit;
  }

  /** Samples the lag while tasks wait; stops when none do. */
  #sample(): void {
    if (this.#sampler) return;
    this.#sampledAt = performance.now();
    this.#sampler = setInterval(() => {
      const now = performance.now();
      const lag = now - this.#sampledAt - SAMPLE_MS;
      this.#sampledAt = now;
      if (lag > LAG_HIGH_MS) this.#limit = Math.max(1, Math.floor(this.#limit / 2));
      else if (lag < LAG_LOW_MS) this.#limit = Math.min(this.#total, this.#limit + 1);
      if (this.waiting === 0) {
        clearInterval(this.#sampler);
        this.#sampler = undefined;
        this.#limit = this.#total;
        return;
      }
      this.#pump();
    }, SAMPLE_MS);
    this.#sampler.unref();
  }

  /** Tasks waiting, all tenants (for metrics and tests). */
  get waiting(): number {
    let count = 0;
    for (const tenant of this.#tenants.values()) count += tenant.waiting.length;
    return count;
  }

  get running(): number {
    return this.#running;
  }

  /** Queues `task` for `tenantId`; resolves with its result once it has run. */
  push<T>(tenantId: string, task: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let tenant = this.#tenants.get(tenantId);
      if (!tenant) {
        tenant = { waiting: [], running: 0 };
        this.#tenants.set(tenantId, tenant);
        this.#order.push(tenantId);
      }
      tenant.waiting.push(() => task().then(resolve, reject));
      this.#sample();
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#running < this.#limit) {
      const tenantId = this.#pick();
      if (tenantId === undefined) return;
      const tenant = this.#tenants.get(tenantId)!;
      const run = tenant.waiting.shift()!;
      tenant.running += 1;
      this.#running += 1;
      void run().finally(() => {
        tenant.running -= 1;
        this.#running -= 1;
        if (tenant.running === 0 && tenant.waiting.length === 0) this.#forget(tenantId);
        this.#pump();
      });
    }
  }

  /** The next tenant in turn with a task waiting and a free slot, or undefined. */
  #pick(): string | undefined {
    const count = this.#order.length;
    for (let step = 0; step < count; step += 1) {
      const index = (this.#next + step) % count;
      const tenantId = this.#order[index]!;
      const tenant = this.#tenants.get(tenantId)!;
      if (tenant.waiting.length > 0 && tenant.running < this.#perTenant) {
        this.#next = index + 1;
        return tenantId;
      }
    }
    return undefined;
  }

  #forget(tenantId: string): void {
    this.#tenants.delete(tenantId);
    const index = this.#order.indexOf(tenantId);
    this.#order.splice(index, 1);
    if (this.#next > index) this.#next -= 1;
  }
}
