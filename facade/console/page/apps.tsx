import { useEffect, useState } from "preact/hooks";
import { api, ApiError, when } from "./api.js";

interface Consent {
  id: string;
  client: { id: string; name: string; registration: string };
  tenant: { id: string; name: string };
  resource: { url: string; server?: string };
  scopes: string[];
  createdAt: string;
  expiresAt: string;
}

/**
 * Connected apps: the OAuth clients (Claude, ChatGPT, VS Code, Cursor, mcp-remote…) the user
 * authorized to reach the tool bridge, each revocable (docs/mcp.md "Consents"). Revoking stops
 * its tokens at once.
 */
export function AppsPanel() {
  const [consents, setConsents] = useState<Consent[] | undefined>();
  const [error, setError] = useState("");
  const [confirming, setConfirming] = useState<string | undefined>();
  const load = () =>
    api<{ consents: Consent[] }>("GET", "/oauth/consents")
      .then((answer) => setConsents(answer.consents))
      .catch((caught: ApiError) => caught.status !== 401 && setError(caught.message));
  useEffect(() => {
    void load();
  }, []);
  const revoke = async (consent: Consent) => {
    try {
      await api("DELETE", `/oauth/consents/${encodeURIComponent(consent.id)}`);
      setConfirming(undefined);
      await load();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };
  return (
    <section aria-labelledby="apps-title">
      <h2 id="apps-title">Connected apps</h2>
      <p class="muted">
        MCP clients you authorized to use the tool bridge at <code>{location.origin}/bridge/mcp</code> through OAuth. Each reaches one tenant.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {consents && consents.length === 0 && <p class="muted">No connected apps.</p>}
      {consents && consents.length > 0 && (
        <div class="scroll">
          <table aria-label="Connected apps">
            <thead>
              <tr>
                {["App", "Tenant", "Access", "Scopes", "Authorized", "Expires", "Actions"].map((header) => (
                  <th scope="col" key={header}>
                    {header}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {consents.map((consent) => (
                <tr key={consent.id}>
                  <th scope="row">
                    {consent.client.name}
                    <div class="muted mono">{consent.client.id}</div>
                  </th>
                  <td>{consent.tenant.name || consent.tenant.id}</td>
                  <td>{consent.resource.server ? `MCP server ${consent.resource.server}` : "Tool catalog"}</td>
                  <td>{consent.scopes.join(", ")}</td>
                  <td>{when(consent.createdAt)}</td>
                  <td>{when(consent.expiresAt)}</td>
                  <td class="actions">
                    {confirming === consent.id ? (
                      <span class="row" role="alertdialog" aria-label={`Confirm revoking ${consent.client.name}`}>
                        Revoke “{consent.client.name}”?
                        <button type="button" class="danger" onClick={() => revoke(consent)}>
                          Yes, revoke “{consent.client.name}”
                        </button>
                        <button type="button" class="secondary" onClick={() => setConfirming(undefined)}>
                          Cancel
                        </button>
                      </span>
                    ) : (
                      <button type="button" class="danger" aria-label={`Revoke ${consent.client.name}`} onClick={() => setConfirming(consent.id)}>
                        Revoke
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
