/**
 * Bridge benchmark: MCP tools/call through the bridge to a connected VM agent, p50/p99 and
 * calls/s at concurrency 1 and 50 with the server's CPU time per call, then the server's memory
 * with 5,000 idle VM sockets.
 * Loopback only; the server runs in a child process and is stopped at the end.
 *
 * Two MCP callers are measured over the same endpoint (`/bridge/mcp/`, one session, an `sk_`
 * key as docs/interface.md 4.5 prescribes for MCP clients):
 *   - `sdk`: the official SDK `Client` + `StreamableHTTPClientTransport` (what an MCP client
 *     costs end to end, client overhead included);
 *   - `http`: the same JSON-RPC `tools/call` POSTs over keep-alive `node:http`, so the load
 *     generator costs little and the figures describe the bridge.
 * Falls back to POST /bridge/tools/execute when the MCP endpoint does not answer.
 *
 * Then the gateway as an MCP proxy: `tools/call` of server-everything's `echo` (its own
 * process, Streamable HTTP) directly, and through the gateway as `everything__echo` in a
 * session and as plain JSON-RPC without one (stateless); p50/p99 at concurrency 1, calls/s at
 * 16, and the gateway's CPU time per call (utime+stime from /proc/<pid>/stat around each run).
 *
 *   npm run bench:bridge     (BENCH_CALLS, BENCH_IDLE_SOCKETS override the sizes;
 *                             BENCH_ONLY=upstream runs the proxy part alone;
 *                             BENCH_CPU_PROFILE=<dir> profiles the server)
 */
import type { ChildProcess } from "node:child_process";
import { forkReady } from "./internal/fork-ready.js";
import { once } from "node:events";
import { execSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, request as httpRequest } from "node:http";
import { availableParallelism, loadavg } from "node:os";
import WebSocket from "ws";
import { JSONRPCClient, JSONRPCServer, JSONRPCServerAndClient } from "json-rpc-2.0";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 5000);
const IDLE = Number(process.env.BENCH_IDLE_SOCKETS ?? 5000);
const VM_ID = "bench-vm";
const ONLY = process.env.BENCH_ONLY;
const CLOCK_TICK_MS = 1000 / Number(execSync("getconf CLK_TCK").toString().trim() || 100);

/** CPU time (user + system) a process has used so far, in ms, from /proc/<pid>/stat. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start at state; utime and stime are the 14th and 15th fields.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * CLOCK_TICK_MS;
}

interface Memory {
  usage: NodeJS.MemoryUsage;
  vms: { connected: number };
}

async function startServer(): Promise<{ child: ChildProcess; origin: string }> {
  const { child, words } = await forkReady(
    "bench/internal/server.ts",
    {
      STORAGE: "memory",
      LOG_LEVEL: "silent",
      GATEWAY_RATE_LIMIT_RPM: "1000000",
      GATEWAY_API_RATE_LIMIT_RPM: "1000000",
      GATEWAY_TENANT_RATE_LIMIT_RPM: "100000000",
      QUOTA_VM_SOCKETS_PER_TENANT: "1000000",
      GATEWAY_JWT_SECRET: "bench-secret-that-is-at-least-32-characters",
      MCP_SERVERS_ALLOW_PRIVATE: "true",
    },
    // BENCH_CPU_PROFILE=<dir> writes a .cpuprofile of the server for `node --cpu-prof` tooling.
    ["--expose-gc", ...(process.env.BENCH_CPU_PROFILE ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROFILE}`] : [])],
  );
  return { child, origin: words[0]! };
}

async function memory(child: ChildProcess): Promise<Memory> {
  child.send({ type: "memory" });
  const [message] = (await once(child, "message")) as [Memory & { type: string }];
  return message;
}

function connectVm(url: string, token: string, serve: boolean): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false });
    ws.once("error", reject);
    ws.once("open", () => {
      if (!serve) return resolve(ws);
      const server = new JSONRPCServer({ errorListener: () => undefined });
      server.addMethod("ping", () => ({}));
      server.addMethod("tools/call", (params: { arguments?: { text?: string } }) => ({
        content: [{ type: "text", text: params.arguments?.text ?? "" }],
      }));
      const rpc = new JSONRPCServerAndClient(server, new JSONRPCClient((payload) => ws.send(JSON.stringify(payload))), {
        errorListener: () => undefined,
      });
      ws.on("message", (data) => void rpc.receiveAndSend(JSON.parse(data.toString())).catch(() => undefined));
      rpc
        .request("tools/register", {
          tools: [{ name: "echo", description: "echo", inputSchema: { type: "object", properties: { text: { type: "string" } } } }],
        })
        .then(() => resolve(ws), reject);
    });
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

type Caller = () => Promise<void>;

async function measure(call: Caller, concurrency: number, total: number, cpuOf?: number) {
  for (let i = 0; i < Math.min(500, total); i++) await call(); // warm-up
  const cpuBefore = cpuOf === undefined ? 0 : cpuMs(cpuOf);
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < total) {
        const t = performance.now();
        await call();
        latencies.push(performance.now() - t);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuOf === undefined ? {} : { gatewayCpuMsPerCall: +((cpuMs(cpuOf) - cpuBefore) / total).toFixed(3) };
  latencies.sort((a, b) => a - b);
  return {
    concurrency,
    calls: total,
    p50ms: +percentile(latencies, 50).toFixed(3),
    p99ms: +percentile(latencies, 99).toFixed(3),
    callsPerSecond: Math.round(total / seconds),
    ...cpu,
  };
}

/** JSON-RPC `tools/call` POSTs over keep-alive node:http; the answer (JSON or SSE) is read to its end. */
function postCaller(url: string, headers: Record<string, string>, tool: string, agent: Agent): Caller {
  const target = new URL(url);
  let id = 1;
  return () =>
    new Promise<void>((resolve, reject) => {
      const body = `{"jsonrpc":"2.0","id":${id++},"method":"tools/call","params":{"name":"${tool}","arguments":{"message":"hi"}}}`;
      const req = httpRequest(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: "POST",
          agent,
          headers: { ...headers, "content-length": Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString();
            if (res.statusCode !== 200 || !text.includes("Echo: hi") || text.includes('"isError":true'))
              reject(new Error(`tools/call answered ${res.statusCode}: ${text}`));
            else resolve();
          });
        },
      );
      req.once("error", reject);
      req.end(body);
    });
}

/** An MCP session's headers (initialize with the SDK client, then raw POSTs under its id). */
async function sessionHeaders(url: string, auth: Record<string, string>): Promise<{ headers: Record<string, string>; client: Client }> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: auth } });
  await client.connect(transport);
  return {
    client,
    headers: {
      ...auth,
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      "mcp-session-id": transport.sessionId!,
      "mcp-protocol-version": transport.protocolVersion ?? "2025-11-25",
    },
  };
}

/**
 * server-everything's `echo` directly, and through the gateway (session, stateless). "Added"
 * is each gateway mode's figure minus the direct one: the gateway's own hop, since its call
 * upstream is the same session-mode call the direct caller makes.
 */
async function proxyBench(gateway: ChildProcess, origin: string, key: string) {
  const { child: upstream, words } = await forkReady("bench/internal/everything.ts", {});
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const clients: Client[] = [];
  try {
    const everythingUrl = words[0]!;
    const registered = await fetch(`${origin}/gateway/v1/mcp/servers`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "everything", url: everythingUrl }),
    });
    const server = (await registered.json()) as { health?: string };
    if (server.health !== "healthy") throw new Error(`server-everything not healthy through the gateway: ${JSON.stringify(server)}`);
    const direct = await sessionHeaders(everythingUrl, {});
    const session = await sessionHeaders(`${origin}/bridge/mcp/`, { authorization: `Bearer ${key}` });
    clients.push(direct.client, session.client);
    const callers: [string, Caller][] = [
      ["direct (session)", postCaller(everythingUrl, direct.headers, "echo", agent)],
      ["gateway session", postCaller(`${origin}/bridge/mcp/`, session.headers, "everything__echo", agent)],
      [
        "gateway stateless",
        postCaller(
          `${origin}/bridge/mcp/`,
          { authorization: `Bearer ${key}`, accept: "application/json", "content-type": "application/json" },
          "everything__echo",
          agent,
        ),
      ],
    ];
    const runs: Record<string, unknown>[] = [];
    const p50: Record<string, number> = {};
    // Both gateway modes are warmed first (4,000 calls each at c=16): without it the first
    // mode measured paid for the server's JIT warm-up (its added p50 came out 0.1–0.15 ms
    // higher and its CPU per call 15–30 % higher than the same mode measured second).
    // BENCH_REVERSE=1 measures stateless before session, to check the order no longer matters.
    for (const [, call] of callers.slice(1)) await measure(call, 16, 4000);
    for (const [mode, call] of process.env.BENCH_REVERSE ? [callers[0]!, callers[2]!, callers[1]!] : callers) {
      const one = await measure(call, 1, CALLS, gateway.pid);
      const many = await measure(call, 16, CALLS * 2, gateway.pid);
      p50[mode] = one.p50ms;
      runs.push({ mode, ...one }, { mode, ...many });
    }
    const added = (mode: string) => +(p50[mode]! - p50["direct (session)"]!).toFixed(3);
    return { runs, addedP50AtC1ms: { session: added("gateway session"), stateless: added("gateway stateless") }, targetAddedP50ms: 0.5 };
  } finally {
    for (const client of clients) await client.close().catch(() => undefined);
    agent.destroy();
    upstream.kill("SIGTERM");
    await once(upstream, "exit");
  }
}

interface McpCallers {
  sdk: Caller;
  http: Caller;
  close: () => Promise<void>;
}

async function mcpCallers(origin: string, key: string): Promise<McpCallers | undefined> {
  const client = new Client({ name: "bench", version: "1.0.0" });
  const url = `${origin}/bridge/mcp/`;
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
    // The SDK transport hands its one long-lived abort signal to every POST's fetch, and
    // undici's Request leaves a listener on it until garbage collection: over 20,000 calls
    // this load generator passed 1,500 listeners and warned on every call. Its POSTs are
    // sent without it (the benchmark never cancels one); the GET stream keeps it, so closing
    // the client still ends that stream.
    fetch: (input, init) => fetch(input, init?.method === "POST" ? { ...init, signal: undefined } : init),
  });
  try {
    await Promise.race([client.connect(transport), new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), 5000))]);
    const tools = await client.listTools();
    const name = `vm__${VM_ID}__echo`;
    if (!tools.tools.some((tool) => tool.name === name)) throw new Error(`${name} not listed over MCP`);
    const agent = new Agent({ keepAlive: true, maxSockets: 64 });
    const headers = {
      authorization: `Bearer ${key}`,
      accept: "application/json, text/event-stream",
      "content-type": "application/json",
      "mcp-session-id": transport.sessionId!,
      "mcp-protocol-version": transport.protocolVersion ?? "2025-11-25",
    };
    const target = new URL(url);
    let id = 1_000_000;
    const http: Caller = () =>
      new Promise<void>((resolve, reject) => {
        const body = `{"jsonrpc":"2.0","id":${id++},"method":"tools/call","params":{"name":"${name}","arguments":{"text":"hi"}}}`;
        const req = httpRequest(
          {
            host: target.hostname,
            port: target.port,
            path: target.pathname,
            method: "POST",
            agent,
            headers: { ...headers, "content-length": Buffer.byteLength(body) },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (chunk: Buffer) => chunks.push(chunk));
            res.on("end", () => {
              const text = Buffer.concat(chunks).toString();
              if (res.statusCode !== 200 || !text.includes('"result"') || text.includes('"isError":true'))
                reject(new Error(`tools/call answered ${res.statusCode}: ${text}`));
              else resolve();
            });
          },
        );
        req.once("error", reject);
        req.end(body);
      });
    return {
      sdk: async () => {
        const result = await client.callTool({ name, arguments: { text: "hi" } });
        if (result.isError) throw new Error(JSON.stringify(result.content));
      },
      http,
      close: async () => {
        agent.destroy();
        await client.close();
      },
    };
  } catch (error) {
    process.stderr.write(`MCP endpoint not usable (${(error as Error).message}); measuring POST /bridge/tools/execute\n`);
    await client.close().catch(() => undefined);
    return undefined;
  }
}

function restCaller(origin: string, token: string): Caller {
  const body = JSON.stringify({ tool_name: "echo", input: { text: "hi" }, vm_id: VM_ID });
  return async () => {
    const res = await fetch(`${origin}/bridge/tools/execute`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body,
    });
    if (res.status !== 200) throw new Error(`execute answered ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  };
}

async function main() {
  const fdLimit = Number(execSync("ulimit -n", { shell: "/bin/bash" }).toString().trim());
  if (fdLimit < IDLE + 200) throw new Error(`ulimit -n is ${fdLimit}; ${IDLE} sockets need at least ${IDLE + 200}`);
  const { child, origin } = await startServer();
  const sockets: WebSocket[] = [];
  try {
    const registered = await fetch(`${origin}/gateway/v1/auth/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ email: `bench${Date.now()}@example.com`, password: "Correct-Horse-9", fullName: "Bench" }),
    });
    const { token } = (await registered.json()) as { token: string };
    // docs/interface.md 4.5: MCP clients present an API key (`Authorization: Bearer <API_KEY>`).
    const created = await fetch(`${origin}/gateway/v1/auth/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "bench", description: "bridge benchmark" }),
    });
    const { key } = (await created.json()) as { key: string };
    const wsBase = origin.replace(/^http/, "ws");
    if (ONLY === "upstream") {
      process.stdout.write(
        `${JSON.stringify({ mcpProxy: await proxyBench(child, origin, key), load: { cpus: availableParallelism(), loadAverage1m: +loadavg()[0]!.toFixed(2) } }, null, 2)}\n`,
      );
      return;
    }

    // Memory first, in a fresh process: RSS measured after the call phase would include the
    // heap that phase grew and V8 keeps, which hides the sockets' own cost.
    const before = await memory(child);
    const idle: WebSocket[] = [];
    for (let i = 0; i < IDLE; i += 250) {
      const batch = Array.from({ length: Math.min(250, IDLE - i) }, (_, j) =>
        connectVm(`${wsBase}/bridge/agents/bench/ws?vmId=idle-${i + j}`, token, false),
      );
      idle.push(...(await Promise.all(batch)));
    }
    sockets.push(...idle);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await memory(child);
    const perSocket = (key: "rss" | "heapUsed" | "external") => +((after.usage[key] - before.usage[key]) / IDLE / 1024).toFixed(2);
    for (const ws of idle) ws.terminate();

    const vm = await connectVm(`${wsBase}/bridge/agents/bench/ws?vmId=${VM_ID}`, key, true);
    sockets.push(vm);
    const mcp = await mcpCallers(origin, key);
    const latency: Record<string, unknown>[] = [];
    if (mcp) {
      for (const [caller, call] of [
        ["http", mcp.http],
        ["sdk", mcp.sdk],
      ] as const) {
        latency.push({ caller, ...(await measure(call, 1, CALLS, child.pid)) });
        latency.push({ caller, ...(await measure(call, 50, CALLS * 4, child.pid)) });
      }
      await mcp.close();
    } else {
      const call = restCaller(origin, key);
      latency.push(
        { caller: "rest", ...(await measure(call, 1, CALLS, child.pid)) },
        { caller: "rest", ...(await measure(call, 50, CALLS * 4, child.pid)) },
      );
    }
    const transport = mcp ? "MCP tools/call at /bridge/mcp/" : "POST /bridge/tools/execute";
    vm.close();
    const mcpProxy = await proxyBench(child, origin, key);
    // After every call has settled and a full GC: what the call phase left behind (leak check).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const settled = await memory(child);

    const report = {
      transport,
      latency,
      mcpProxy,
      idleSockets: {
        connected: after.vms.connected,
        rssBeforeMiB: +(before.usage.rss / 2 ** 20).toFixed(1),
        rssAfterMiB: +(after.usage.rss / 2 ** 20).toFixed(1),
        rssPerSocketKiB: perSocket("rss"),
        heapPerSocketKiB: perSocket("heapUsed"),
        externalPerSocketKiB: perSocket("external"),
      },
      afterCalls: {
        heapUsedMiB: +(settled.usage.heapUsed / 2 ** 20).toFixed(1),
        heapUsedBeforeMiB: +(before.usage.heapUsed / 2 ** 20).toFixed(1),
        vmsConnected: settled.vms.connected,
      },
      load: { cpus: availableParallelism(), loadAverage1m: +loadavg()[0]!.toFixed(2) },
      targets: { p50AtC1ms: 1, callsPerSecondAtC50: 5000, kibPerIdleSocket: 30 },
    };
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  } finally {
    for (const ws of sockets) ws.terminate();
    child.kill("SIGTERM");
    await once(child, "exit");
  }
}

await main();
