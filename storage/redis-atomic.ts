import type { Redis } from "ioredis";
import type { AccountState, Atomic, HoldLine, HoldRefusal, PlaceClaim, PlacesClaim, PlaceRenewal, SettleLine } from "./atomic.js";
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
 * Cluster slot — with `held` (the live holds' total), `capped` (the id of the capped hold in
 * flight, storage/admission.ts), `nx` (the earliest lease end among them), `ex` (when the hash
 * itself expires) and one field `h:<id>` = "<amount>:<lease end>" per hold. Expired holds are
 * looked for only once `nx` has passed (an HGETALL of the account's few holds), and the hash's
 * TTL is pushed only when a hold would outlive it. So a hold reads the hash and the value and
 * writes the hash; a settlement that knows what its hold placed (the process that placed it)
 * deletes its entry and takes its amount off `held`, reading nothing. An account counted at
 * once (`commit`: requests per minute) never holds: its line only adds to the value (and takes
 * it back when the count does not fit). (Versions before this one kept the holds in
 * `<value key>:holds` and `<value key>:hold-expiry`; those end with their own TTL.)
 */
const LEDGER = `
local function releaseExpired(h, now)
  local all = redis.call('HGETALL', h)
  local held, nx, capped = 0, nil, nil
  local gone = {}
  for i = 1, #all, 2 do
    local f, v = all[i], all[i + 1]
    if f == 'capped' then capped = v
    elseif string.sub(f, 1, 2) == 'h:' then
      local amount, exp = string.match(v, '^(-?%d+):(%d+)$')
      amount, exp = tonumber(amount), tonumber(exp)
      if exp <= now then gone[#gone + 1] = f
      else
        held = held + amount
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
  redis.call('HSET', h, 'held', held)
  if nx then redis.call('HSET', h, 'nx', nx) else redis.call('HDEL', h, 'nx') end
  return held, capped, nx
end
-- The account's holds as of now (expired ones released first): their total, the capped one,
-- the earliest lease end, when the hash expires, and hold id's own entry.
local function state(h, now, id)
  local st = redis.call('HMGET', h, 'held', 'capped', 'nx', 'ex', 'h:' .. id)
  local held, capped, nx, ex, own = tonumber(st[1]) or 0, st[2] or nil, tonumber(st[3]), tonumber(st[4]), st[5] or nil
  if nx and nx <= now then
    held, capped, nx = releaseExpired(h, now)
    own = redis.call('HGET', h, 'h:' .. id) or nil
  end
  return held, capped, nx, ex, own
end
local function amountOf(entry) return tonumber(string.match(entry, '^(-?%d+):')) end`;

// KEYS: 2 per line (value, hash). ARGV: id, now, lease, then per line: kind (b|u), amount, known, limit ('' none), windowMs, commit (0|1).
// Answers {0, amount, capped (0|1), …} per line when admitted, {1, line, value, held, ttl} when refused.
const HOLD = `${LEDGER}${ADMIT_LUA}
local id, now, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local n = #KEYS / 2
local out, states, counted = {0}, {}, {}
local function undo(upto)
  for j = 1, upto do
    if counted[j] then redis.call('DECRBY', KEYS[2*j-1], counted[j]) end
  end
end
for i = 1, n do
  local v, h = KEYS[2*i-1], KEYS[2*i]
  local a = 3 + (i-1)*6
  local kind, amount, known, limit, window, commit = ARGV[a+1], tonumber(ARGV[a+2]), tonumber(ARGV[a+3]), ARGV[a+4], ARGV[a+5], ARGV[a+6]
  if commit == '1' then
    -- Counted at once and exact: added, then taken back if it does not fit (no holds on such an account).
    local after = redis.call('INCRBY', v, amount)
    if after == amount and window ~= '0' and redis.call('PTTL', v) < 0 then redis.call('PEXPIRE', v, window) end
    if admit(kind, amount, known, limit, commit, after - amount, 0, false) < 0 then
      redis.call('DECRBY', v, amount)
      undo(i - 1)
      local ttl = redis.call('PTTL', v)
      if ttl < 0 then ttl = 0 end
      return {1, i - 1, after - amount, 0, ttl}
    end
    counted[i] = amount
    out[#out + 1] = amount
    out[#out + 1] = 0
  else
    local held, capped, nx, ex, own = state(h, now, id)
    local raw = redis.call('GET', v)
    local value = tonumber(raw or '0')
    local taken, isCapped = admit(kind, amount, known, limit, commit, value, held, capped ~= nil and capped ~= id)
    if taken < 0 then
      undo(i - 1)
      local ttl = redis.call('PTTL', v)
      if ttl < 0 then ttl = 0 end
      return {1, i - 1, value, held, ttl}
    end
    states[i] = {taken, isCapped, raw == false, held, nx, ex, own}
    out[#out + 1] = taken
    out[#out + 1] = isCapped
  end
end
for i = 1, n do
  local st = states[i]
  if st then
    local v, h = KEYS[2*i-1], KEYS[2*i]
    local a = 3 + (i-1)*6
    local taken, isCapped, fresh, held, nx, ex, own = st[1], st[2], st[3], st[4], st[5], st[6], st[7]
    -- A window starts with the first request that touches it.
    if fresh and ARGV[a+5] ~= '0' then redis.call('SET', v, '0', 'PX', ARGV[a+5]) end
    -- A hold placed again under its id replaces the earlier one (as storage/atomic.ts does).
    local prior = 0
    if own then prior = amountOf(own) end
    local exp = now + lease
    local fields = {'h:' .. id, taken .. ':' .. exp, 'held', held - prior + taken}
    if isCapped == 1 then fields[#fields + 1] = 'capped'; fields[#fields + 1] = id end
    if not nx or nx > exp then fields[#fields + 1] = 'nx'; fields[#fields + 1] = exp end
    -- The hash outlives its holds: its TTL is pushed (two leases on) only when this one would pass it.
    local push = not ex or ex < exp + 60000
    if push then
      ex = exp + lease + 60000
      fields[#fields + 1] = 'ex'; fields[#fields + 1] = ex
    end
    redis.call('HSET', h, unpack(fields))
    if push then redis.call('PEXPIREAT', h, ex) end
  end
end
return out`;

// KEYS: 2 per line (value, hash), then the counters. ARGV: id, now, lines, then per line: delta,
// windowMs, and what the hold placed on it: '-' nothing, '<amount>:<capped 0|1>' as its
// process knows it, 'r' read it from the account; then per counter: delta.
const SETTLE = `${LEDGER}
local id, now, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, n do
  local v, h = KEYS[2*i-1], KEYS[2*i]
  local delta, window, placed = tonumber(ARGV[3*i+1]), ARGV[3*i+2], ARGV[3*i+3]
  if placed == 'r' then
    local held, capped, nx, ex, own = state(h, now, id)
    if own then
      redis.call('HDEL', h, 'h:' .. id)
      if capped == id then redis.call('HDEL', h, 'capped') end
      redis.call('HSET', h, 'held', held - amountOf(own))
    end
  elseif placed ~= '-' then
    -- Still there (not released as expired by another call): its amount leaves the total.
    if redis.call('HDEL', h, 'h:' .. id) == 1 then
      local amount, wasCapped = string.match(placed, '^(-?%d+):(%d)$')
      redis.call('HINCRBY', h, 'held', 0 - tonumber(amount))
      if wasCapped == '1' then redis.call('HDEL', h, 'capped') end
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
local held, capped = state(KEYS[2], tonumber(ARGV[1]), '')
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

// KEYS: holders and expiries of each set in turn. ARGV: holder, token, weight, now, lease, then each set's limit.
const CLAIM_PLACES = `${PLACES}
local holder, token, weight, now, lease = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS / 2
for i = 1, n do
  local h, z = KEYS[2 * i - 1], KEYS[2 * i]
  reapPlaces(h, z, now)
  local others, own = 0, 0
  local all = redis.call('HGETALL', h)
  for j = 1, #all, 2 do
    if all[j] == holder then own = weightOf(all[j + 1]) else others = others + weightOf(all[j + 1]) end
  end
  if weight > own and others + weight > tonumber(ARGV[5 + i]) then return {0, i - 1, others} end
end
for i = 1, n do
  local h, z = KEYS[2 * i - 1], KEYS[2 * i]
  redis.call('HSET', h, holder, weight .. '|' .. token)
  redis.call('ZADD', z, now + lease, holder)
  keepPlaces(h, z, lease)
end
return {1, 0, 0}`;

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
  // The number of keys comes first in each call (two per set).
  gwClaimPlaces: { lua: CLAIM_PLACES },
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
/** Holds placed here and not settled yet, remembered at most (a settlement without its entry reads the account). */
const MAX_REMEMBERED_HOLDS = 100_000;

export class RedisAtomic implements Atomic {
  readonly #redis: Redis;
  readonly #prefix: string;
  /** What each hold placed here put on each account (`<amount>:<capped 0|1>`), until its settlement. */
  readonly #placed = new Map<string, Map<string, string>>();
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
      Math.trunc(line.known ?? 0),
      line.limit === undefined ? (line.kind === "balance" ? 0 : "") : Math.trunc(line.limit),
      line.windowMs ? Math.ceil(line.windowMs) : 0,
      line.commit ? "1" : "0",
    ]);
    const result = ((await this.#scripts.gwHold(keys.length, ...keys, id, Date.now(), Math.ceil(leaseMs), ...args)) as number[]).map(
      Number,
    );
    if (result[0] === 1) {
      const [, index, value, held, ttlMs] = result as [number, number, number, number, number];
      return { index, value, held, ttlMs };
    }
    // What it placed on each account, for its settlement to take off without reading.
    const placed = new Map<string, string>();
    lines.forEach((line, i) => {
      if (!line.commit) placed.set(line.key, `${result[1 + 2 * i]}:${result[2 + 2 * i]}`);
    });
    if (this.#placed.size >= MAX_REMEMBERED_HOLDS) this.#placed.clear();
    this.#placed.set(id, placed);
    return null;
  }

  async settle(id: string, lines: SettleLine[], counters: [key: string, delta: number][] = []): Promise<void> {
    if (lines.length === 0 && counters.length === 0) return;
    const keys = [...lines.flatMap((line) => this.#accountKeys(line.key)), ...counters.map(([key]) => this.#prefix + key)];
    const placed = this.#placed.get(id);
    this.#placed.delete(id);
    const args = [
      ...lines.flatMap((line) => [
        Math.trunc(line.delta),
        line.windowMs ? Math.ceil(line.windowMs) : 0,
        // Nothing held; what this process placed; or unknown here (read it from the account).
        line.held === false ? "-" : (placed?.get(line.key) ?? "r"),
      ]),
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

  async claimPlaces(
    sets: readonly { key: string; limit: number }[],
    holder: string,
    token: string,
    weight: number,
    leaseMs: number,
  ): Promise<PlacesClaim> {
    const [taken, refusedAt, others] = (await this.#scripts.gwClaimPlaces(
      sets.length * 2,
      ...sets.flatMap(({ key }) => this.#placeKeys(key)),
      holder,
      token,
      Math.trunc(weight),
      Date.now(),
      Math.ceil(leaseMs),
      ...sets.map(({ limit }) => Math.trunc(limit)),
    )) as [number, number, number];
    return Number(taken) === 1 ? { taken: true } : { taken: false, refusedAt: Number(refusedAt), others: Number(others) };
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
