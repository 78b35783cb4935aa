import type { Redis } from "ioredis";
import type { AccountState, Atomic, HoldLine, HoldRefusal, PlaceClaim, PlaceRenewal, SettleLine } from "./atomic.js";
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
    -- A hold placed again under its id replaces the earlier one (as storage/atomic.ts does).
    local prior = tonumber(redis.call('HGET', h, id) or '0')
    redis.call('HSET', h, id, amount)
    redis.call('HINCRBY', h, '_held', amount - prior)
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

/*
 * Places with leases (storage/atomic.ts claimPlace). Per set two keys: a hash holder →
 * "<weight>|<token>" and a sorted set of holders by lease end. Every call first drops the
 * places whose lease ended. Both keys outlive the longest lease they carry by a minute.
 */
const PLACES = `
local function reapPlaces(h, z, now)
  local expired = redis.call('ZRANGEBYSCORE', z, '-inf', now)
  for _, id in ipairs(expired) do
    redis.call('HDEL', h, id)
    redis.call('ZREM', z, id)
  end
end
local function weightOf(v) return tonumber(string.match(v, '^(%d+)|')) end
local function tokenOf(v) return string.sub(v, string.find(v, '|', 1, true) + 1) end
local function keepPlaces(h, z, lease)
  local keep = math.max(redis.call('PTTL', h), lease + 60000)
  redis.call('PEXPIRE', h, keep)
  redis.call('PEXPIRE', z, keep)
end`;

// KEYS: holders, expiries. ARGV: holder, token, weight, limit, now, lease.
const CLAIM_PLACE = `${PLACES}
local h, z = KEYS[1], KEYS[2]
local holder, token, weight, limit, now, lease = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
reapPlaces(h, z, now)
local others, own = 0, 0
local all = redis.call('HGETALL', h)
for i = 1, #all, 2 do
  if all[i] == holder then own = weightOf(all[i + 1]) else others = others + weightOf(all[i + 1]) end
end
if weight > own and others + weight > limit then return {0, others, own} end
redis.call('HSET', h, holder, weight .. '|' .. token)
redis.call('ZADD', z, now + lease, holder)
keepPlaces(h, z, lease)
return {1, others, own}`;

// KEYS: holders, expiries. ARGV: holder, token.
const RELEASE_PLACE = `${PLACES}
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v and tokenOf(v) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return 1`;

// KEYS: holders, expiries. ARGV: now, lease, then per place: holder, token, weight.
const RENEW_PLACES = `${PLACES}
local h, z = KEYS[1], KEYS[2]
local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
reapPlaces(h, z, now)
for i = 3, #ARGV, 3 do
  local v = redis.call('HGET', h, ARGV[i])
  if not v or tokenOf(v) == ARGV[i + 1] then
    redis.call('HSET', h, ARGV[i], ARGV[i + 2] .. '|' .. ARGV[i + 1])
    redis.call('ZADD', z, now + lease, ARGV[i])
  end
end
keepPlaces(h, z, lease)
return 1`;

// KEYS: holders, expiries. ARGV: now.
const COUNT_PLACES = `${PLACES}
reapPlaces(KEYS[1], KEYS[2], tonumber(ARGV[1]))
local weight, holders = 0, 0
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  weight = weight + weightOf(v)
  holders = holders + 1
end
return {weight, holders}`;

const SCRIPTS = {
  gwIncrement: { numberOfKeys: 1, lua: INCREMENT },
  gwCompareAndSet: { numberOfKeys: 1, lua: COMPARE_AND_SET },
  gwDebit: { numberOfKeys: 1, lua: DEBIT },
  gwHold: { lua: HOLD },
  gwAddAll: { lua: "for i, key in ipairs(KEYS) do redis.call('INCRBY', key, ARGV[i]) end return 0" },
  gwSettle: { lua: SETTLE },
  gwRenew: { lua: RENEW },
  gwAccount: { numberOfKeys: 3, lua: ACCOUNT },
  gwClaimPlace: { numberOfKeys: 2, lua: CLAIM_PLACE },
  gwReleasePlace: { numberOfKeys: 2, lua: RELEASE_PLACE },
  gwRenewPlaces: { numberOfKeys: 2, lua: RENEW_PLACES },
  gwCountPlaces: { numberOfKeys: 2, lua: COUNT_PLACES },
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
    this.#scripts = Object.fromEntries(Object.keys(SCRIPTS).map((name) => [name, commands[name]!.bind(redis)])) as Record<
      keyof typeof SCRIPTS,
      ScriptCall
    >;
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
      expected === null ? "1" : "0",
      expected ?? "",
      next === null ? "1" : "0",
      next ?? "",
      ttlMs ? Math.ceil(ttlMs) : 0,
    );
    return Number(result) === 1;
  }

  adjust(key: string, delta: number) {
    return this.#redis.incrby(this.#prefix + key, Math.trunc(delta));
  }

  async addAll(deltas: [key: string, delta: number][]) {
    if (!deltas.length) return;
    await this.#scripts.gwAddAll(
      deltas.length,
      ...deltas.map(([key]) => this.#prefix + key),
      ...deltas.map(([, delta]) => Math.trunc(delta)),
    );
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
    const [value, held, ttlMs, capped] = (await this.#scripts.gwAccount(...this.#accountKeys(key), Date.now())) as [
      number,
      number,
      number,
      string | null,
    ];
    const state: AccountState = { value: Number(value), held: Number(held), ttlMs: Number(ttlMs) };
    if (capped) state.capped = capped;
    return state;
  }

  #placeKeys(key: string): [string, string] {
    const base = this.#prefix + key;
    return [`${base}:places`, `${base}:place-expiry`];
  }

  async claimPlace(key: string, holder: string, token: string, weight: number, limit: number, leaseMs: number): Promise<PlaceClaim> {
    const [taken, others, own] = (await this.#scripts.gwClaimPlace(
      ...this.#placeKeys(key),
      holder,
      token,
      Math.trunc(weight),
      Math.trunc(limit),
      Date.now(),
      Math.ceil(leaseMs),
    )) as [number, number, number];
    return { taken: Number(taken) === 1, others: Number(others), own: Number(own) };
  }

  async releasePlace(key: string, holder: string, token: string): Promise<void> {
    await this.#scripts.gwReleasePlace(...this.#placeKeys(key), holder, token);
  }

  async renewPlaces(key: string, places: PlaceRenewal[], leaseMs: number): Promise<void> {
    if (places.length === 0) return;
    await this.#scripts.gwRenewPlaces(
      ...this.#placeKeys(key),
      Date.now(),
      Math.ceil(leaseMs),
      ...places.flatMap((place) => [place.holder, place.token, Math.trunc(place.weight)]),
    );
  }

  async places(key: string): Promise<{ weight: number; holders: number }> {
    const [weight, holders] = (await this.#scripts.gwCountPlaces(...this.#placeKeys(key), Date.now())) as [number, number];
    return { weight: Number(weight), holders: Number(holders) };
  }
}
