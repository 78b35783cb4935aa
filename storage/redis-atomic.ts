import type { Redis } from "ioredis";
import type { AccountState, Atomic, HoldLine, HoldRefusal, SettleLine } from "./atomic.js";
import { ADMIT_LUA } from "./admission.js";

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

/*
 * The ledger (storage/atomic.ts HoldLine). Per account three keys: the value (a plain integer
 * string, so INCRBY grants keep working), a hash of holds (id → amount, "_held" their total
 * and "_capped" the id of the capped hold in flight, storage/admission.ts) and a sorted set of
 * hold ids by lease expiry. Every call first releases the account's expired holds (a
 * ZRANGEBYSCORE that is empty on the hot path).
 */
const REAP = `
local function drop(h, id)
  if redis.call('HGET', h, '_capped') == id then redis.call('HDEL', h, '_capped') end
end
local function reap(h, z, now)
  local expired = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 200)
  for _, id in ipairs(expired) do
    local amount = redis.call('HGET', h, id)
    if amount then
      redis.call('HDEL', h, id)
      redis.call('HINCRBY', h, '_held', 0 - tonumber(amount))
    end
    drop(h, id)
    redis.call('ZREM', z, id)
  end
end
local function tidy(h, z)
  if tonumber(redis.call('HGET', h, '_held') or '0') <= 0 and redis.call('HLEN', h) <= 1 then redis.call('DEL', h, z) end
end`;

// KEYS: 3 per line. ARGV: id, now, lease, then per line: kind (b|u), amount, limit ('' none), windowMs, commit (0|1).
const HOLD = `${REAP}${ADMIT_LUA}
local id, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = #KEYS / 3
local amounts, caps = {}, {}
for i = 1, n do
  local v, h, z = KEYS[3*i-2], KEYS[3*i-1], KEYS[3*i]
  local a = 3 + (i-1)*5
  reap(h, z, now)
  local kind, limit, commit = ARGV[a+1], ARGV[a+3], ARGV[a+5]
  local value = tonumber(redis.call('GET', v) or '0')
  local held = tonumber(redis.call('HGET', h, '_held') or '0')
  local cappedBy = redis.call('HGET', h, '_capped')
  local amount, capped = admit(kind, tonumber(ARGV[a+2]), limit, commit, value, held, cappedBy ~= false and cappedBy ~= id)
  if amount < 0 then
    local ttl = redis.call('PTTL', v)
    if ttl < 0 then ttl = 0 end
    return {i - 1, value, held, ttl}
  end
  amounts[i], caps[i] = amount, capped
end
for i = 1, n do
  local v, h, z = KEYS[3*i-2], KEYS[3*i-1], KEYS[3*i]
  local a = 3 + (i-1)*5
  local amount, window, commit = amounts[i], tonumber(ARGV[a+4]), ARGV[a+5]
  if window > 0 and redis.call('EXISTS', v) == 0 then redis.call('SET', v, '0', 'PX', window) end
  if commit == '1' then
    redis.call('INCRBY', v, amount)
  else
    redis.call('HSET', h, id, amount)
    redis.call('HINCRBY', h, '_held', amount)
    if caps[i] == 1 then redis.call('HSET', h, '_capped', id) end
    redis.call('ZADD', z, now + lease, id)
    local keep = math.max(redis.call('PTTL', h), lease + 60000)
    redis.call('PEXPIRE', h, keep)
    redis.call('PEXPIRE', z, keep)
  end
end
return false`;

// KEYS: 3 per line. ARGV: id, now, then per line: delta, windowMs.
const SETTLE = `${REAP}
local id, now = ARGV[1], tonumber(ARGV[2])
for i = 1, #KEYS / 3 do
  local v, h, z = KEYS[3*i-2], KEYS[3*i-1], KEYS[3*i]
  local delta, window = tonumber(ARGV[2*i+1]), tonumber(ARGV[2*i+2])
  reap(h, z, now)
  local amount = redis.call('HGET', h, id)
  if amount then
    redis.call('HDEL', h, id)
    redis.call('HINCRBY', h, '_held', 0 - tonumber(amount))
    redis.call('ZREM', z, id)
  end
  drop(h, id)
  tidy(h, z)
  if delta ~= 0 then
    redis.call('INCRBY', v, delta)
    if window > 0 and redis.call('PTTL', v) < 0 then redis.call('PEXPIRE', v, window) end
  end
end
return 1`;

// KEYS: 3 per account. ARGV: id, expiresAt.
const RENEW = `
for i = 1, #KEYS / 3 do
  redis.call('ZADD', KEYS[3*i], 'XX', ARGV[2], ARGV[1])
end
return 1`;

// KEYS: value, holds, expiries. ARGV: now. Read-only apart from releasing expired holds.
const ACCOUNT = `${REAP}
reap(KEYS[2], KEYS[3], tonumber(ARGV[1]))
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), tonumber(redis.call('HGET', KEYS[2], '_held') or '0'), ttl, redis.call('HGET', KEYS[2], '_capped')}`;

const SCRIPTS = {
  gwIncrement: { numberOfKeys: 1, lua: INCREMENT },
  gwCompareAndSet: { numberOfKeys: 1, lua: COMPARE_AND_SET },
  gwDebit: { numberOfKeys: 1, lua: DEBIT },
  gwHold: { lua: HOLD },
  gwAddAll: { lua: "for i, key in ipairs(KEYS) do redis.call('INCRBY', key, ARGV[i]) end return 0" },
  gwSettle: { lua: SETTLE },
  gwRenew: { lua: RENEW },
  gwAccount: { numberOfKeys: 3, lua: ACCOUNT },
} as const;

type ScriptCall = (...args: (string | number)[]) => Promise<unknown>;

/**
 * The same operations across every process on one Redis: single commands or Lua scripts,
 * each loaded once per connection (ioredis defineCommand: EVALSHA, falling back to EVAL
 * when the server lost its script cache).
 */
export class RedisAtomic implements Atomic {
  readonly #redis: Redis;
  readonly #prefix: string;
  readonly #scripts: Record<keyof typeof SCRIPTS, ScriptCall>;

  constructor(redis: Redis, prefix: string) {
    this.#redis = redis;
    this.#prefix = `${prefix}:atomic:`;
    const commands = redis as unknown as Record<string, ScriptCall>;
    for (const [name, definition] of Object.entries(SCRIPTS)) {
      if (typeof commands[name] !== "function") redis.defineCommand(name, definition);
    }
    this.#scripts = Object.fromEntries(Object.keys(SCRIPTS).map((name) => [name, commands[name]!.bind(redis)])) as Record<keyof typeof SCRIPTS, ScriptCall>;
  }

  async increment(key: string, by: number, ttlMs: number) {
    const [value, ttl] = (await this.#scripts.gwIncrement(this.#prefix + key, by, Math.max(1, Math.ceil(ttlMs)))) as [number, number];
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
    const result = await this.#scripts.gwCompareAndSet(
      this.#prefix + key,
      expected === null ? "1" : "0", expected ?? "", next === null ? "1" : "0", next ?? "", ttlMs ? Math.ceil(ttlMs) : 0,
    );
    return Number(result) === 1;
  }

  adjust(key: string, delta: number) {
    return this.#redis.incrby(this.#prefix + key, Math.trunc(delta));
  }

  async addAll(deltas: [key: string, delta: number][]) {
    if (!deltas.length) return;
    await this.#scripts.gwAddAll(deltas.length, ...deltas.map(([key]) => this.#prefix + key), ...deltas.map(([, delta]) => Math.trunc(delta)));
  }

  async debit(key: string, amount: number, floor = 0) {
    const [ok, balance] = (await this.#scripts.gwDebit(this.#prefix + key, Math.trunc(amount), floor)) as [number, number];
    return { ok: Number(ok) === 1, balance: Number(balance) };
  }

  async balance(key: string) {
    return Number((await this.#redis.get(this.#prefix + key)) ?? 0);
  }

  #accountKeys(key: string): string[] {
    const base = this.#prefix + key;
    return [base, `${base}:holds`, `${base}:hold-expiry`];
  }

  async hold(id: string, lines: HoldLine[], leaseMs: number): Promise<HoldRefusal | null> {
    if (lines.length === 0) return null;
    const keys = lines.flatMap((line) => this.#accountKeys(line.key));
    const args = lines.flatMap((line) => [
      line.kind === "balance" ? "b" : "u",
      Math.trunc(line.amount),
      line.limit === undefined ? (line.kind === "balance" ? 0 : "") : Math.trunc(line.limit),
      line.windowMs ? Math.ceil(line.windowMs) : 0,
      line.commit ? "1" : "0",
    ]);
    const result = (await this.#scripts.gwHold(keys.length, ...keys, id, Date.now(), Math.ceil(leaseMs), ...args)) as number[] | null;
    if (!result) return null;
    const [index, value, held, ttlMs] = result.map(Number) as [number, number, number, number];
    return { index, value, held, ttlMs };
  }

  async settle(id: string, lines: SettleLine[]): Promise<void> {
    if (lines.length === 0) return;
    const keys = lines.flatMap((line) => this.#accountKeys(line.key));
    const args = lines.flatMap((line) => [Math.trunc(line.delta), line.windowMs ? Math.ceil(line.windowMs) : 0]);
    await this.#scripts.gwSettle(keys.length, ...keys, id, Date.now(), ...args);
  }

  async renew(id: string, keys: string[], leaseMs: number): Promise<void> {
    if (keys.length === 0) return;
    const all = keys.flatMap((key) => this.#accountKeys(key));
    await this.#scripts.gwRenew(all.length, ...all, id, Date.now() + Math.ceil(leaseMs));
  }

  async account(key: string): Promise<AccountState> {
    const [value, held, ttlMs, capped] = (await this.#scripts.gwAccount(...this.#accountKeys(key), Date.now())) as [number, number, number, string | null];
    const state: AccountState = { value: Number(value), held: Number(held), ttlMs: Number(ttlMs) };
    if (capped) state.capped = capped;
    return state;
  }
}
