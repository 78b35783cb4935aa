import type { Redis } from "ioredis";
import type { Atomic } from "./atomic.js";

const INCREMENT = `
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
local t = redis.call('PTTL', KEYS[1])
if t < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]); t = tonumber(ARGV[2]) end
return {v, t}`;

const COMPARE_AND_SET = `
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if cur ~= false then return 0 end
else
  if cur ~= ARGV[2] then return 0 end
end
if ARGV[3] == '1' then redis.call('DEL', KEYS[1]); return 1 end
if tonumber(ARGV[5]) > 0 then redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5]) else redis.call('SET', KEYS[1], ARGV[4]) end
return 1`;

const DEBIT = `
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local amount = tonumber(ARGV[1])
if cur - amount < tonumber(ARGV[2]) then return {0, cur} end
return {1, redis.call('DECRBY', KEYS[1], amount)}`;

/** The same operations across every process on one Redis: single commands or Lua scripts. */
export class RedisAtomic implements Atomic {
  readonly #redis: Redis;
  readonly #prefix: string;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = `${prefix}:atomic:`;
  }

  async increment(key: string, by: number, ttlMs: number) {
    const [value, ttl] = (await this.#redis.eval(INCREMENT, 1, this.#prefix + key, by, Math.max(1, Math.ceil(ttlMs)))) as [number, number];
    return { value: Number(value), ttlMs: Number(ttl) };
  }

  async counter(key: string) {
    return Number((await this.#redis.get(this.#prefix + key)) ?? 0);
  }

  async setIfAbsent(key: string, value: string, ttlMs?: number) {
    const result = ttlMs
      ? await this.#redis.set(this.#prefix + key, value, "PX", Math.max(1, Math.ceil(ttlMs)), "NX")
      : await this.#redis.set(this.#prefix + key, value, "NX");
    return result === "OK";
  }

  get(key: string) {
    return this.#redis.get(this.#prefix + key);
  }

  async delete(key: string) {
    await this.#redis.del(this.#prefix + key);
  }

  async compareAndSet(key: string, expected: string | null, next: string | null, ttlMs?: number) {
    const result = await this.#redis.eval(
      COMPARE_AND_SET, 1, this.#prefix + key,
      expected === null ? "1" : "0", expected ?? "", next === null ? "1" : "0", next ?? "", ttlMs ? Math.ceil(ttlMs) : 0,
    );
    return Number(result) === 1;
  }

  adjust(key: string, delta: number) {
    return this.#redis.incrby(this.#prefix + key, Math.trunc(delta));
  }

  async debit(key: string, amount: number, floor = 0) {
    const [ok, balance] = (await this.#redis.eval(DEBIT, 1, this.#prefix + key, Math.trunc(amount), floor)) as [number, number];
    return { ok: Number(ok) === 1, balance: Number(balance) };
  }

  async balance(key: string) {
    return Number((await this.#redis.get(this.#prefix + key)) ?? 0);
  }
}
