import "uplot/dist/uPlot.min.css";
import "./styles.css";
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, credits, firstGet, preload, whenSessionEnds, type Session, type Workspace } from "./api.js";
import { KeysPanel } from "./keys.js";
import { UsagePanel } from "./usage.js";
import { OtherKeysPanel, ToolsPanel } from "./lists.js";
import { OperatorPanel } from "./operator.js";
import { AppsPanel } from "./apps.js";
import { ConsentScreen, consentUid } from "./consent.js";

function SignIn({ message, onSignedIn }: { message: string; onSignedIn(session: Session): void }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError("");
    try {
      await api("POST", "/session", { body: { email, password }, signIn: true });
      onSignedIn(await api<Session>("GET", "/session", { signIn: true }));
    } catch (caught) {
      setError((caught as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Gateway console</h1>
      {message && (
        <p class="notice" role="status">
          {message}
        </p>
      )}
      <form onSubmit={submit} aria-label="Sign in">
        <label for="email">Email</label>
        <input id="email" type="email" autoComplete="username" required value={email} onInput={(event) => setEmail(event.currentTarget.value)} />
        <label for="password">Password</label>
        <input id="password" type="password" autoComplete="current-password" required value={password} onInput={(event) => setPassword(event.currentTarget.value)} />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      <p class="muted">
        No account yet? Create one with <code>POST /gateway/v1/auth/register</code> or <code>npm run admin -- create-user</code>.
      </p>
    </main>
  );
}

const TABS = [
  { id: "keys", label: "API keys" },
  { id: "usage", label: "Usage" },
  { id: "other", label: "Gateway & personal keys" },
  { id: "tools", label: "Agents & tools" },
  { id: "apps", label: "Connected apps" },
] as const;
type Tab = (typeof TABS)[number]["id"] | "operator";

function Console({ session, onSignOut }: { session: Session; onSignOut(): void }) {
  const [workspaces, setWorkspaces] = useState<Workspace[]>([]);
  const [workspaceId, setWorkspaceId] = useState(session.user.workspaceId);
  const [tab, setTab] = useState<Tab>("keys");
  const [refresh, setRefresh] = useState(0);
  const loadWorkspaces = () =>
    firstGet<{ workspaces: Workspace[] }>("/workspaces")
      .then((answer) => setWorkspaces(answer.workspaces))
      .catch(() => undefined);
  useEffect(() => {
    void loadWorkspaces();
  }, [refresh]);
  const workspace = workspaces.find((entry) => entry.id === workspaceId);
  const tabs = session.operator ? [...TABS, { id: "operator" as const, label: "Operator" }] : TABS;
  const signOut = async () => {
    await api("DELETE", "/session").catch(() => undefined);
    onSignOut();
  };
  return (
    <>
      <header>
        <h1>Gateway console</h1>
        <div class="account">
          <label for="workspace">Workspace</label>
          <select id="workspace" value={workspaceId} onChange={(event) => setWorkspaceId(event.currentTarget.value)}>
            {workspaces.length === 0 && <option value={workspaceId}>{workspaceId}</option>}
            {workspaces.map((entry) => (
              <option value={entry.id} key={entry.id}>
                {entry.name}
              </option>
            ))}
          </select>
          <p class="balance" aria-live="polite">
            Balance: <strong id="balance">{workspace ? credits(workspace.creditBalance) : "…"}</strong> credits
          </p>
          <span class="who">{session.user.email}</span>
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      {workspace && workspace.creditBalance <= 0 && (
        <p class="notice" role="status">
          This workspace has no credits: its keys get 402 until an operator grants some (<code>npm run admin -- grant-credits --workspace {workspace.id} --credits 10</code>).
        </p>
      )}
      <nav aria-label="Sections">
        {tabs.map((entry) => (
          <button type="button" key={entry.id} aria-current={tab === entry.id ? "page" : undefined} onClick={() => setTab(entry.id)}>
            {entry.label}
          </button>
        ))}
      </nav>
      <main>
        {tab === "keys" && <KeysPanel workspaceId={workspaceId} isDefault={workspaceId === session.user.workspaceId} onChange={() => setRefresh(refresh + 1)} />}
        {tab === "usage" && <UsagePanel tenantId={workspace?.tenantId ?? session.user.tenantId} refresh={refresh} />}
        {tab === "other" && <OtherKeysPanel />}
        {tab === "tools" && <ToolsPanel />}
        {tab === "apps" && <AppsPanel />}
        {tab === "operator" && <OperatorPanel onGranted={() => setRefresh(refresh + 1)} />}
      </main>
    </>
  );
}

/** Set when the page is the MCP authorization server's consent screen (/oauth/interaction/{uid}), not the console. */
const CONSENT_UID = consentUid(location.pathname);

function App() {
  const [session, setSession] = useState<Session | null | undefined>();
  const [message, setMessage] = useState(CONSENT_UID ? "Sign in to answer an application's request for access." : "");
  useEffect(() => {
    whenSessionEnds(() => {
      setSession(null);
      setMessage("Your session has expired or was signed out. Sign in again.");
    });
    firstGet<Session>("/session", { signIn: true })
      .then(setSession)
      .catch(() => setSession(null));
  }, []);
  if (session === undefined) return <p class="muted">Loading…</p>;
  if (session === null) return <SignIn message={message} onSignedIn={(next) => (setMessage(""), setSession(next))} />;
  if (CONSENT_UID)
    return (
      <ConsentScreen
        uid={CONSENT_UID}
        session={session}
        onSignOut={() => {
          setMessage("You are signed out. Sign in as the user who gives access.");
          setSession(null);
        }}
      />
    );
  return (
    <Console
      session={session}
      onSignOut={() => {
        setMessage("You are signed out.");
        setSession(null);
      }}
    />
  );
}

// The consent screen reads its own request (consent.tsx), not the console's first screen.
preload(CONSENT_UID ? ["/session"] : ["/session", "/workspaces", "/api-keys"]);
render(<App />, document.getElementById("app")!);
