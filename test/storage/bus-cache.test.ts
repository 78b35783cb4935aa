import { describe, expect, it, vi } from "vitest";
import { MemoryBus } from "../../storage/bus.js";
import { BusCache } from "../../storage/bus-cache.js";

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe("BusCache", () => {
  it("serves a loaded value until another cache on the bus invalidates it", async () => {
    const bus = new MemoryBus();
    const here = new BusCache<{ v: number }>(bus, "c", { ttlMs: 60_000 });
    const there = new BusCache<{ v: number }>(bus, "c", { ttlMs: 60_000 });
    await tick();
    let loads = 0;
    const load = async () => ({ v: ++loads });
    expect(await here.get("a", load)).toEqual({ v: 1 });
    expect(await here.get("a", load)).toEqual({ v: 1 });
    expect(loads).toBe(1);
    await there.invalidate("a");
    await tick();
    expect(await here.get("a", load)).toEqual({ v: 2 });
    await Promise.all([here.close(), there.close()]);
  });

  it("does not cache misses, nor a load that overlapped an invalidation", async () => {
    const bus = new MemoryBus();
    const cache = new BusCache<string>(bus, "c", { ttlMs: 60_000 });
    await tick();
    let value: string | null = null;
    expect(await cache.get("k", async () => value)).toBeNull();
    value = "created";
    expect(await cache.get("k", async () => value)).toBe("created");

    let release!: () => void;
    const slow = cache.get("x", () => new Promise<string>((resolve) => (release = () => resolve("stale"))));
    await tick();
    await cache.invalidate("x");
    release();
    expect(await slow).toBe("stale");
    expect(await cache.get("x", async () => "fresh")).toBe("fresh");
    await cache.close();
  });

  it("expires entries after ttlMs and caches nothing with ttlMs 0", async () => {
    const bus = new MemoryBus();
    const short = new BusCache<number>(bus, "c", { ttlMs: 20 });
    const off = new BusCache<number>(bus, "c", { ttlMs: 0 });
    await tick();
    let n = 0;
    // The cache reads Date.now(): only the date is faked, moved past the ttl (the bus's hops stay real).
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      expect(await short.get("a", async () => ++n)).toBe(1);
      vi.setSystemTime(Date.now() + 19);
      expect(await short.get("a", async () => ++n)).toBe(1);
      vi.setSystemTime(Date.now() + 1);
      expect(await short.get("a", async () => ++n)).toBe(2);
    } finally {
      vi.useRealTimers();
    }
    expect(await off.get("a", async () => ++n)).toBe(3);
    expect(await off.get("a", async () => ++n)).toBe(4);
    await Promise.all([short.close(), off.close()]);
  });
});
