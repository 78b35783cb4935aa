import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, when } from "./api.js";

/** Loads one console listing; a 404 (a mode without that endpoint) reads as "not available". */
function useListing<T>(path: string, deps: unknown[]): { data?: T; error: string } {
  const [state, setState] = useState<{ data?: T; error: string }>({ error: "" });
  useEffect(() => {
    let live = true;
    api<T>("GET", path)
      .then((data) => live && setState({ data, error: "" }))
      .catch((caught: ApiError) => live && caught.status !== 401 && setState({ error: caught.status === 404 ? "Not available on this deployment." : caught.message }));
    return () => {
      live = false;
    };
  }, deps);
  return state;
}

function Table({ label, headers, rows, empty }: { label: string; headers: string[]; rows: ComponentChildren[][]; empty: string }) {
  if (rows.length === 0) return <p class="muted">{empty}</p>;
  return (
    <div class="scroll">
      <table aria-label={label}>
        <thead>
          <tr>
            {headers.map((header) => (
              <th scope="col" key={header}>
                {header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((cells, index) => (
            <tr key={index}>
              {cells.map((cell, column) => (column === 0 ? <th scope="row">{cell}</th> : <td>{cell}</td>))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Failure({ error }: { error: string }) {
  return error ? (
    <p class="error" role="alert">
      {error}
    </p>
  ) : null;
}

interface GatewayKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt: string | null;
}
interface PersonalKey {
  id: string;
  name: string;
  prefix: string;
  scopes: string[];
  createdAt: string;
  lastUsedAt: string | null;
}

export function OtherKeysPanel() {
  const gateway = useListing<GatewayKey[]>("/gateway-keys", []);
  const personal = useListing<{ data: PersonalKey[] }>("/personal-keys", []);
  return (
    <section aria-labelledby="other-keys-title">
      <h2 id="other-keys-title">Gateway and personal keys</h2>
      <p class="muted">
        Gateway keys (<code>sk_…</code>) reach <code>/gateway/v1</code> and the tool bridge; personal keys reach the Account API at <code>/account/v1</code>. Both are made with a
        signed-in Gateway session (<code>POST /gateway/v1/auth/keys</code>, <code>POST /account/v1/keys</code>).
      </p>
      <h3>Gateway keys</h3>
      <Failure error={gateway.error} />
      {gateway.data && (
        <Table
          label="Gateway keys"
          headers={["Name", "Prefix", "Created", "Last used", "Expires"]}
          rows={gateway.data.map((key) => [key.name, <code>{key.prefix}…</code>, when(key.createdAt), when(key.lastUsedAt), when(key.expiresAt)])}
          empty="No gateway keys."
        />
      )}
      <h3>Personal keys</h3>
      <Failure error={personal.error} />
      {personal.data && (
        <Table
          label="Personal keys"
          headers={["Name", "Prefix", "Scopes", "Created", "Last used"]}
          rows={personal.data.data.map((key) => [key.name, <code>{key.prefix}…</code>, key.scopes.join(", "), when(key.createdAt), when(key.lastUsedAt)])}
          empty="No personal keys."
        />
      )}
    </section>
  );
}

interface Agent {
  id: string;
  name: string;
  model: string;
  status: string;
  tools: string[];
}
interface McpServer {
  name: string;
  url: string;
  shared: boolean;
  health: string;
  lastError: string | null;
  toolCount: number;
}
interface Vm {
  vmId: string;
  agentId: string;
  connectedAt: string;
  tools: number;
}

export function ToolsPanel() {
  const agents = useListing<Agent[]>("/agents", []);
  const servers = useListing<{ servers: McpServer[] }>("/mcp/servers", []);
  const vms = useListing<{ vms: Vm[] }>("/vms", []);
  return (
    <section aria-labelledby="tools-title">
      <h2 id="tools-title">Agents, MCP servers and VMs</h2>
      <h3>Agents</h3>
      <Failure error={agents.error} />
      {agents.data && (
        <Table label="Agents" headers={["Name", "Model", "Status", "Tools"]} rows={agents.data.map((agent) => [agent.name, agent.model, agent.status, agent.tools.length])} empty="No agents." />
      )}
      <h3>Upstream MCP servers</h3>
      <Failure error={servers.error} />
      {servers.data && (
        <Table
          label="Upstream MCP servers"
          headers={["Name", "URL", "Health", "Tools", "Shared", "Last error"]}
          rows={servers.data.servers.map((server) => [
            server.name,
            <code>{server.url}</code>,
            <span class={`health ${server.health}`}>{server.health}</span>,
            server.toolCount,
            server.shared ? "yes" : "no",
            server.lastError ?? "—",
          ])}
          empty="No upstream MCP servers."
        />
      )}
      <h3>Connected VMs</h3>
      <Failure error={vms.error} />
      {vms.data && <Table label="Connected VMs" headers={["VM", "Agent", "Connected", "Tools"]} rows={vms.data.vms.map((vm) => [vm.vmId, vm.agentId, when(vm.connectedAt), vm.tools])} empty="No VM connected." />}
    </section>
  );
}
