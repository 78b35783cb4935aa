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
 * The ledger (storage/atomic.ts HoldLine), docs/storage.md "The ledger on Redis". Per account
 * two keys: the value (a plain integer string, so INCRBY grants keep working) and, for an
 * account that holds, one hash `{<value key>}:h` — the braces make it share the value's Redis
 * Cluster slot — with `held` (the live holds' total), `n` (how many), `capped` (the id of the
 * capped hold in flight, storage/admission.ts), `nx` (the earliest lease end among them), `ex`
 * (when the hash itself expires) and one field `h:<id>` = "<amount>:<lease end>" per hold.
 * Expired holds are looked for only once `nx` has passed (an HGETALL of the account's few
 * holds); the hash goes with its last hold, and its TTL is pushed only when a hold would
 * outlive it. So a hold reads the hash and the value and writes the hash; a settlement reads
 * and writes the hash and adds to the value. An account counted at once (`commit`: requests
 * per minute) never holds: its line reads and adds to the value alone. (Versions before this
 * one kept the holds in `<value key>:holds` and `<value key>:hold-expiry`; those end with
 * their own TTL.)
 */
const LEDGER = `
local function releaseExpired(h, now)
  local all = redis.call('HGETALL', h)
  local held, n, nx, capped = 0, 0, nil, nil
  local gone = {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if f == 'capped' then capped = v
    elseif string.sub(f, 1, 2) == 'h:' then
      local amount, exp = string.match(v, '^(-?%d+):(%d+)$')
      amount, exp = tonumber(amount), tonumber(exp)
      if exp <= now then table.insert(gone, f)
      else
        held, n = held + amount, n + 1
        if not nx or exp < nx then nx = exp end
      end
    end
  end
  if capped and not redis.call('HEXISTS', h, 'h:' .. capped) then capped = nil end
  for _, f in ipairs(gone) do
    if capped and 'h:' .. capped == f then capped = nil end
    redis.call('HDEL', h, f)
  end
  if not capped then redis.call('HDEL', h, 'capped') end
  redis.call('HSET', h, 'held', held, 'n', n)
  if nx then redis.call('HSET', h, 'nx', nx) else redis.call('HDEL', h, 'nx') end
  return held, n, capped, nx
end
-- The account's holds as of now (expired ones released first): their total, how many, the
-- capped one, the earliest lease end, when the hash expires, and hold id's own entry.
local function state(h, now, id)
  local st = redis.call('HMGET', h, 'held', 'n', 'capped', 'nx', 'ex', 'h:' .. id)
  local held, n, capped, nx, ex, own = tonumber(st[1]) or 0, tonumber(st[2]) or 0, st[3] or nil, tonumber(st[4]), tonumber(st[5]), st[6] or nil
  if nx and nx <= now then
    held, n, capped, nx = releaseExpired(h, now)
    own = redis.call('HGET', h, 'h:' .. id) or nil
  end
  return held, n, capped, nx, ex, own
end`;

// KEYS: 2 per line (value, hash). ARGV: id, now, lease, then per line: kind (b|u), amount, limit ('' none), windowMs, commit (0|1).
const HOLD = `${LEDGER}${ADMIT_LUA}
local id, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = #KEYS / 2
local amounts, caps, values, states = {}, {}, {}, {}
for i = 1, n do
  local v, h = KEYS[2*i-1], KEYS[2*i]
  local a = 3 + (i-1)*5
  local kind, limit, commit = ARGV[a+1], ARGV[a+3], ARGV[a+5]
  local st = {0, 0, nil, nil, nil, nil}
  if commit ~= '1' then st = {state(h, now, id)} end
  local raw = redis.call('GET', v)
  local value = tonumber(raw or '0')
  local amount, isCapped = admit(kind, tonumber(ARGV[a+2]), limit, commit, value, st[1], st[3] ~= nil and st[3] ~= id)
  if amount < 0 then
    local ttl = redis.call('PTTL', v)
    if ttl < 0 then ttl = 0 end
    return {i - 1, value, st[1], ttl}
  end
  amounts[i], caps[i], values[i], states[i] = amount, isCapped, raw, st
end
for i = 1, n do
  local v, h = KEYS[2*i-1], KEYS[2*i]
  local a = 3 + (i-1)*5
  local amount, window, commit = amounts[i], ARGV[a+4], ARGV[a+5]
  -- A window starts with the first request that touches it.
  local fresh = values[i] == false and window ~= '0'
  if commit == '1' then
    if fresh then redis.call('SET', v, amount, 'PX', window) else redis.call('INCRBY', v, amount) end
  else
    if fresh then redis.call('SET', v, '0', 'PX', window) end
    local held, count, capped, nx, ex, own = unpack(states[i], 1, 6)
    -- A hold placed again under its id replaces the earlier one (as storage/atomic.ts does).
    local prior = 0
    if own then prior = tonumber(string.match(own, '^(-?%d+):')) else count = count + 1 end
    local exp = now + lease
    local fields = {'h:' .. id, amount .. ':' .. exp, 'held', held - prior + amount, 'n', count}
    if caps[i] == 1 then table.insert(fields, 'capped'); table.insert(fields, id) end
    if not nx or nx > exp then table.insert(fields, 'nx'); table.insert(fields, exp) end
    -- The hash outlives its holds: its TTL is pushed (two leases on) only when this one would pass it.
    if not ex or ex < exp + 60000 then
      ex = exp + lease + 60000
      table.insert(fields, 'ex'); table.insert(fields, ex)
    end
    redis.call('HSET', h, unpack(fields))
    if ex == exp + lease + 60000 then redis.call('PEXPIREAT', h, ex) end
  end
end
return false`;

// KEYS: 2 per line (value, hash), then the counters. ARGV: id, now, lines, then per line: delta, windowMs, held (0|1); then per counter: delta.
const SETTLE = `${LEDGER}
local id, now, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, n do
  local v, h = KEYS[2*i-1], KEYS[2*i]
  local delta, window, wasHeld = tonumber(ARGV[3*i+1]), ARGV[3*i+2], ARGV[3*i+3]
  if wasHeld == '1' then
    local held, count, capped, nx, ex, own = state(h, now, id)
    if own then
      if count <= 1 then
        -- Its last hold: the hash goes.
        redis.call('DEL', h)
      else
        if capped == id then redis.call('HDEL', h, 'h:' .. id, 'capped') else redis.call('HDEL', h, 'h:' .. id) end
        redis.call('HSET', h, 'held', held - tonumber(string.match(own, '^(-?%d+):')), 'n', count - 1)
      end
    end
  end
  if delta ~= 0 then
    local after = redis.call('INCRBY', v, delta)
    -- A window that ended between the hold and now starts again here.
    if window ~= '0' and after == delta and redis.call('PTTL', v) < 0 then redis.call('PEXPIRE', v, window) end
  end
end
for j = 2 * n + 1, #KEYS do
  redis.call('INCRBY', KEYS[j], ARGV[3 + 3 * n + (j - 2 * n)])
end
return 1`;

// KEYS: 2 per account (value, hash). ARGV: id, expiresAt, lease.
const RENEW = `
for i = 1, #KEYS / 2 do
  local h = KEYS[2*i]
  local st = redis.call('HMGET', h, 'h:' .. ARGV[1], 'ex')
  if st[1] then
    local exp = tonumber(ARGV[2])
    redis.call('HSET', h, 'h:' .. ARGV[1], string.match(st[1], '^(-?%d+):') .. ':' .. exp)
    if not st[2] or tonumber(st[2]) < exp + 60000 then
      local ex = exp + tonumber(ARGV[3]) + 60000
      redis.call('HSET', h, 'ex', ex)
      redis.call('PEXPIREAT', h, ex)
    end
  end
end
return 1`;

// KEYS: value, hash. ARGV: now. Read-only apart from releasing expired holds.
const ACCOUNT = `${LEDGER}
local held, n, capped = state(KEYS[2], tonumber(ARGV[1]), '')
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {tonumber(redis.call('GET', KEYS[1]) or '0'), held, ttl, capped}`;

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
  gwAccount: { numberOfKeys: 2, lua: ACCOUNT },
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

  /** An account's value key and its hash, in one Cluster slot (the hash's tag is the value key's name). */
  #accountKeys(key: string): [string, string] {
    const base = this.#prefix + key;
    return [base, `{${base}}:h`];
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

  async settle(id: string, lines: SettleLine[], counters: [key: string, delta: number][] = []): Promise<void> {
    if (lines.length === 0 && counters.length === 0) return;
    const keys = [...lines.flatMap((line) => this.#accountKeys(line.key)), ...counters.map(([key]) => this.#prefix + key)];
    const args = [
      ...lines.flatMap((line) => [Math.trunc(line.delta), line.windowMs ? Math.ceil(line.windowMs) : 0, line.held === false ? "0" : "1"]),
      ...counters.map(([, delta]) => Math.trunc(delta)),
    ];
    await this.#scripts.gwSettle(keys.length, ...keys, id, Date.now(), lines.length, ...args);
  }

  async renew(id: string, keys: string[], leaseMs: number): Promise<void> {
    if (keys.length === 0) return;
    const all = keys.flatMap((key) => this.#accountKeys(key));
    await this.#scripts.gwRenew(all.length, ...all, id, Date.now() + Math.ceil(leaseMs), Math.ceil(leaseMs));
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
