import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, mkdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bearer, registerUser, startTestServer, type TestServer } from "../helpers/server.js";
import { vmSocketUrl } from "../helpers/vm.js";
import { eventually } from "../helpers/eventually.js";

let server: TestServer;
let root: string;
let agent: ChildProcess | undefined;

beforeAll(async () => {
  server = await startTestServer();
  root = await mkdtemp(join(tmpdir(), "vm-agent-root-"));
  await mkdir(join(root, "docs"));
  await writeFile(join(root, "docs", "hello.txt"), "hello from the VM\n");
});
afterAll(async () => {
  if (agent && agent.exitCode === null) agent.kill("SIGKILL");
  await server.close();
  await rm(root, { recursive: true, force: true });
});

it("npm run vm-agent connects, registers its tools, serves them and exits cleanly on SIGINT", async () => {
  const { token } = await registerUser(server);
  const key = (await server.request("/gateway/v1/auth/keys", { method: "POST", headers: bearer(token), json: { name: "vm" } })).body
    .key as string;
  const stderr: string[] = [];
  agent = spawn(
    join("node_modules", ".bin", "tsx"),
    ["scripts/vm-agent.ts", "--url", vmSocketUrl(server.origin, "laptop", {}), "--vm-id", "laptop-1", "--root", root],
    { env: { ...process.env, SERVICE_API_KEY: key }, stdio: ["ignore", "ignore", "pipe"] },
  );
  agent.stderr!.on("data", (chunk) => stderr.push(String(chunk)));
  const exited = new Promise<number | null>((resolve) => agent!.once("exit", (code) => resolve(code)));

  await eventually(() => (server.bridge.vms.local("laptop-1")?.tools.length ?? 0) === 4, 20_000);
  const names = (await server.bridge.catalog.list()).filter((tool) => tool.source.kind === "vm").map((tool) => tool.name);
  expect(names).toEqual([
    "vm__laptop-1__hash_text",
    "vm__laptop-1__list_directory",
    "vm__laptop-1__read_file",
    "vm__laptop-1__system_info",
  ]);

  const execute = (tool_name: string, input: Record<string, unknown>) =>
    server.request("/bridge/tools/execute", { method: "POST", headers: bearer(key), json: { tool_name, input, vm_id: "laptop-1" } });
  const hashed = await execute("hash_text", { text: "abc" });
  expect(hashed.status).toBe(200);
  expect(hashed.body.structuredContent.digest).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  expect((await execute("read_file", { path: "docs/hello.txt" })).body.content[0].text).toBe("hello from the VM\n");
  const listed = await execute("list_directory", { path: "docs" });
  expect(listed.body.structuredContent.entries).toEqual([{ name: "hello.txt", type: "file", size: 18 }]);
  const escaped = await execute("read_file", { path: "../../etc/passwd" });
  expect(escaped.body.isError).toBe(true);
  expect(escaped.body.content[0].text).toContain("outside the shared root");
  expect((await execute("system_info", {})).body.structuredContent.cpus).toBeGreaterThan(0);

  agent.kill("SIGINT");
  expect(await exited).toBe(0);
  expect(stderr.join("")).toContain("registered 4 tools");
  await eventually(() => server.bridge.vms.stats().connected === 0);
});

it("npm run vm-agent refuses a --url that is not ws:// or wss://, without echoing it", async () => {
  for (const url of ["ftp://user:hunter2@bridge.internal/vm", "http://127.0.0.1:1/bridge", "not a url"]) {
    const child = spawn(join("node_modules", ".bin", "tsx"), ["scripts/vm-agent.ts", "--url", url, "--vm-id", "x", "--key", "k"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk) => (stderr += String(chunk)));
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    expect(code, url).toBe(2);
    expect(stderr).toContain("--url must be a ws:// or wss:// URL");
    expect(stderr).not.toContain("hunter2");
  }
});
