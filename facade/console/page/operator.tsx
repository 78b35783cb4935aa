import { useEffect, useState } from "preact/hooks";
import { api, credits } from "./api.js";

interface Balance {
  workspaceId: string;
  name: string;
  tenantId: string;
  status: string;
  creditBalance: number;
}

/** Operators (npm run admin -- grant-operator): workspaces' balances and credit grants, as `admin user` and `admin grant-credits` do. */
export function OperatorPanel({ onGranted }: { onGranted(): void }) {
  const [lookup, setLookup] = useState("");
  const [found, setFound] = useState<Balance[] | undefined>();
  const [workspaceId, setWorkspaceId] = useState("");
  const [amount, setAmount] = useState("");
  const [error, setError] = useState("");
  const [status, setStatus] = useState("");

  const [nextAfter, setNextAfter] = useState<string | undefined>();

  /** An email or a workspace id looks one up; an empty box pages through every workspace. */
  const load = async (value: string, after?: string) => {
    setError("");
    const query = value.includes("@") ? { email: value } : value ? { workspaceId: value } : after ? { after } : {};
    try {
      const answer = await api<{ workspaces: Balance[]; nextAfter?: string }>("GET", "/operator/balances", { query });
      setFound((list) => (after ? [...(list ?? []), ...answer.workspaces] : answer.workspaces));
      setNextAfter(answer.nextAfter);
      if (!after && value && answer.workspaces[0]) setWorkspaceId(answer.workspaces[0].workspaceId);
    } catch (caught) {
      setFound(undefined);
      setNextAfter(undefined);
      setError((caught as Error).message);
    }
  };

  useEffect(() => {
    void load("");
  }, []);

  const find = (event: Event) => {
    event.preventDefault();
    void load(lookup.trim());
  };

  const grant = async (event: Event) => {
    event.preventDefault();
    setError("");
    try {
      const answer = await api<Balance & { granted: number }>("POST", "/operator/credits", { body: { workspaceId: workspaceId.trim(), credits: Number(amount) } });
      setStatus(`Granted ${credits(answer.granted)} credits to ${answer.name}; balance now ${credits(answer.creditBalance)}.`);
      setFound((list) => list?.map((entry) => (entry.workspaceId === answer.workspaceId ? { ...entry, creditBalance: answer.creditBalance } : entry)));
      setAmount("");
      onGranted();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };

  return (
    <section aria-labelledby="operator-title">
      <h2 id="operator-title">Operator: balances and credits</h2>
      <form class="row" onSubmit={find}>
        <label for="operator-lookup">User email or workspace id</label>
        <input id="operator-lookup" placeholder="empty: every workspace" value={lookup} onInput={(event) => setLookup(event.currentTarget.value)} />
        <button type="submit">Look up</button>
      </form>
      {found && (
        <div class="scroll">
          <table aria-label="Workspace balances">
            <thead>
              <tr>
                <th scope="col">Workspace</th>
                <th scope="col">Id</th>
                <th scope="col">Status</th>
                <th scope="col">Balance (credits)</th>
              </tr>
            </thead>
            <tbody>
              {found.map((entry) => (
                <tr key={entry.workspaceId}>
                  <th scope="row">{entry.name}</th>
                  <td>
                    <code>{entry.workspaceId}</code>
                  </td>
                  <td>{entry.status}</td>
                  <td>{credits(entry.creditBalance)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {nextAfter && (
            <button type="button" onClick={() => void load("", nextAfter)}>
              More workspaces
            </button>
          )}
        </div>
      )}
      <form class="create" onSubmit={grant}>
        <div class="fields">
          <label for="grant-workspace">Workspace id</label>
          <input id="grant-workspace" required value={workspaceId} onInput={(event) => setWorkspaceId(event.currentTarget.value)} />
          <label for="grant-credits">Credits to grant</label>
          <input id="grant-credits" required inputMode="decimal" value={amount} onInput={(event) => setAmount(event.currentTarget.value)} />
        </div>
        <button type="submit">Grant credits</button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p aria-live="polite">{status}</p>
    </section>
  );
}
