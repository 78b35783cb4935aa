/**
 * A sorted set in memory, as Redis keeps one (ZADD/ZREM/ZRANGEBYLEX/ZRANGEBYSCORE): members
 * ordered by score, then by member. The memory and fs engines keep every index of
 * storage/indexes.ts in one of these, so a listing costs what it lists (a binary search, then
 * the members it returns), never a walk over every record (docs/storage.md "Indexes").
 */
export class SortedIndex {
  readonly #scores = new Map<string, number>();
  /** [score, member] pairs in order. */
  readonly #order: [number, string][] = [];

  get size(): number {
    return this.#scores.size;
  }

  score(member: string): number | undefined {
    return this.#scores.get(member);
  }

  add(member: string, score: number): void {
    const current = this.#scores.get(member);
    if (current === score) return;
    if (current !== undefined) this.#order.splice(this.#find(current, member), 1);
    this.#scores.set(member, score);
    this.#order.splice(this.#find(score, member), 0, [score, member]);
  }

  remove(member: string): boolean {
    const current = this.#scores.get(member);
    if (current === undefined) return false;
    this.#order.splice(this.#find(current, member), 1);
    this.#scores.delete(member);
    return true;
  }

  /**
   * Members in lexical order (an index whose scores are all 0): those after `after`
   * (exclusive) or from `from` (inclusive), below `below` (exclusive), at most `limit`.
   */
  members(range: { after?: string; from?: string; below?: string; limit?: number } = {}): string[] {
    const out: string[] = [];
    const limit = range.limit ?? Infinity;
    let index = range.after !== undefined ? this.#find(0, range.after, true) : range.from !== undefined ? this.#find(0, range.from) : 0;
    for (; index < this.#order.length && out.length < limit; index++) {
      const member = this.#order[index]![1];
      if (range.below !== undefined && member >= range.below) break;
      out.push(member);
    }
    return out;
  }

  /** Members whose score is at most `max`, lowest score first, at most `limit`. */
  upTo(max: number, limit: number): { member: string; score: number }[] {
    const out: { member: string; score: number }[] = [];
    for (const [score, member] of this.#order) {
      if (score > max || out.length >= limit) break;
      out.push({ member, score });
    }
    return out;
  }

  *entries(): IterableIterator<[string, number]> {
    for (const [score, member] of this.#order) yield [member, score];
  }

  /** The position of (score, member), or of the first pair after it (`past`: after it even when present). */
  #find(score: number, member: string, past = false): number {
    let low = 0;
    let high = this.#order.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const [s, m] = this.#order[mid]!;
      const before = s < score || (s === score && (past ? m <= member : m < member));
      if (before) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}
