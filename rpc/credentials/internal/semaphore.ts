/** At most `limit` holders at once; the rest wait in arrival order. `Infinity` never waits. */
export class Semaphore {
  #limit: number;
  #held = 0;
  #peak = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    this.#limit = limit;
  }

  /** Changes the limit; waiters the new limit admits start at once. */
  set limit(limit: number) {
    this.#limit = limit;
    this.#drain();
  }

  get limit(): number {
    return this.#limit;
  }

  /** Holders now, waiters now, and the most holders ever seen at once (for tests and metrics). */
  stats(): { held: number; waiting: number; peak: number } {
    return { held: this.#held, waiting: this.#waiting.length, peak: this.#peak };
  }

  resetPeak(): void {
    this.#peak = this.#held;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#held >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else this.#take();
    try {
      return await work();
    } finally {
      this.#held -= 1;
      this.#drain();
    }
  }

  #take(): void {
    this.#held += 1;
    if (this.#held > this.#peak) this.#peak = this.#held;
  }

  #drain(): void {
    while (this.#waiting.length > 0 && this.#held < this.#limit) {
      this.#take();
      this.#waiting.shift()!();
    }
  }
}
