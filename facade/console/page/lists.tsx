import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError, when } from "./api.js";
import { NewSecret } from "./keys.js";

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

interface UserKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  expiresAt?: string | null;
  scopes?: string[];
}

/** A user's gateway or personal keys: list, create (secret shown once) and revoke after a confirmation. */
function UserKeys({ kind, path, title, usage, read }: { kind: string; path: string; title: string; usage: ComponentChildren; read(answer: unknown): UserKey[] }) {
  const [keys, setKeys] = useState<UserKey[] | undefined>();
  const [error, setError] = useState("");
  const [name, setName] = useState("");
  const [created, setCreated] = useState<{ secret: string; name: string } | undefined>();
  const [confirming, setConfirming] = useState<string | undefined>();
  const load = () =>
    api<unknown>("GET", path)
      .then((answer) => setKeys(read(answer)))
      .catch((caught: ApiError) => caught.status !== 401 && setError(caught.message));
  useEffect(() => {
    void load();
  }, []);
  const create = async (event: Event) => {
    event.preventDefault();
    setError("");
    try {
      const answer = await api<{ key: string; name: string }>("POST", path, { body: { name } });
      setCreated({ secret: answer.key, name: answer.name });
      setName("");
      await load();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };
  const revoke = async (key: UserKey) => {
    try {
      await api("DELETE", `${path}/${encodeURIComponent(key.id)}`);
      setConfirming(undefined);
      await load();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };
  const id = `${kind}-key-name`;
  return (
    <>
      <h3>{title}</h3>
      <form class="row" onSubmit={create}>
        <label for={id}>New {kind} key name</label>
        <input id={id} required maxLength={100} value={name} onInput={(event) => setName(event.currentTarget.value)} />
        <button type="submit">Create {kind} key</button>
      </form>
      {created && <NewSecret secret={created.secret} name={created.name} usage={usage} onDone={() => setCreated(undefined)} />}
      <Failure error={error} />
      {keys && (
        <Table
          label={title}
          headers={["Name", "Prefix", keys.some((key) => key.scopes) ? "Scopes" : "Expires", "Created", "Last used", "Actions"]}
          rows={keys.map((key) => [
            key.name,
            <code>{key.prefix}</code>,
            key.scopes ? key.scopes.join(", ") : when(key.expiresAt),
            when(key.createdAt),
            when(key.lastUsedAt),
            confirming === key.id ? (
              <span class="row" role="alertdialog" aria-label={`Confirm revoking ${key.name}`}>
                Revoke “{key.name}” for good?
                <button type="button" class="danger" onClick={() => revoke(key)}>
                  Yes, revoke “{key.name}”
                </button>
                <button type="button" class="secondary" onClick={() => setConfirming(undefined)}>
                  Cancel
                </button>
              </span>
            ) : (
              <button type="button" class="danger" aria-label={`Revoke ${key.name}`} onClick={() => setConfirming(key.id)}>
                Revoke
              </button>
            ),
          ])}
          empty={`No ${kind} keys.`}
        />
      )}
    </>
  );
}

export function OtherKeysPanel() {
  return (
    <section aria-labelledby="other-keys-title">
      <h2 id="other-keys-title">Gateway and personal keys</h2>
      <p class="muted">
        Gateway keys (<code>sk_…</code>) reach the Gateway API at <code>/gateway/v1</code> and the tool bridge; personal keys reach the Account API at <code>/account/v1</code>. They
        belong to you, not to a workspace.
      </p>
      <UserKeys
        kind="gateway"
        path="/gateway-keys"
        title="Gateway keys"
        read={(answer) => answer as UserKey[]}
        usage={
          <>
            Send it as <code>X-API-Key</code> or <code>Authorization: Bearer</code> to <code>{location.origin}/gateway/v1</code>.
          </>
        }
      />
      <UserKeys
        kind="personal"
        path="/personal-keys"
        title="Personal keys"
        read={(answer) => (answer as { data: UserKey[] }).data}
        usage={
          <>
            Use it as <code>Authorization: Bearer &lt;key&gt;</code> with an OpenAI-compatible client at <code>{location.origin}/account/v1</code>.
          </>
        }
      />
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

/**
 * Connects the gateway to an upstream server that asks for OAuth (docs/mcp.md "Upstream servers
 * that need OAuth"): the browser goes to its authorization server and comes back to the console.
 */
function AuthorizeServer({ name }: { name: string }) {
  const [error, setError] = useState("");
  const start = async () => {
    setError("");
    try {
      const { authorizationUrl } = await api<{ authorizationUrl: string }>("POST", `/mcp/servers/${encodeURIComponent(name)}/oauth`, { body: {} });
      location.assign(authorizationUrl);
    } catch (caught) {
      setError((caught as Error).message);
    }
  };
  return (
    <>
      <button type="button" class="secondary" aria-label={`Authorize the gateway at ${name}`} onClick={start}>
        Authorize
      </button>
      {error && <span class="error"> {error}</span>}
    </>
  );
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
          headers={["Name", "URL", "Health", "Tools", "Shared", "Last error", "OAuth"]}
          rows={servers.data.servers.map((server) => [
            server.name,
            <code>{server.url}</code>,
            <span class={`health ${server.health}`}>{server.health}</span>,
            server.toolCount,
            server.shared ? "yes" : "no",
            server.lastError ?? "—",
            server.shared ? "—" : <AuthorizeServer name={server.name} />,
          ])}
          empty="No upstream MCP servers."
        />
      )}
      <h3>Connected VMs</h3>
      <Failure error={vms.error} />
      {vms.data && (
        <Table
          label="Connected VMs"
          headers={["VM", "Agent", "Connected", "Tools"]}
          rows={vms.data.vms.map((vm) => [vm.vmId, vm.agentId, when(vm.connectedAt), vm.tools])}
          empty="No VM connected."
        />
      )}
    </section>
  );
}
