import { useEffect, useState } from "preact/hooks";
import { api, ApiError, when, type Session } from "./api.js";

/** What the console endpoint tells the consent screen about an authorization request (rpc/oauth/authorization-methods.ts). */
interface Authorization {
  uid: string;
  client: {
    id: string;
    name: string;
    uri?: string;
    registration: "metadata-document" | "dynamic" | "operator";
    applicationType: string;
    redirectUri: string;
    redirectHost: string;
    loopbackRedirect: boolean;
  };
  resource: { url: string; server?: string };
  scopes: { name: string; description: string; required: boolean }[];
  tenants: { id: string; name: string; slug: string; role: string }[];
  expiresAt: string;
  decided: boolean;
}

/** The address a consent screen is at: /oauth/interaction/{uid} (the authorization server sends the browser there). */
export function consentUid(pathname: string): string | undefined {
  const match = /^\/oauth\/interaction\/([\w-]+)\/?$/.exec(pathname);
  return match?.[1];
}

function Registration({ client }: { client: Authorization["client"] }) {
  if (client.registration === "metadata-document")
    return (
      <p>
        Its identity is the address of its metadata document, <code>{client.id}</code>.
      </p>
    );
  if (client.registration === "operator") return <p>It was registered by an operator of this gateway.</p>;
  return (
    <p class="notice" role="note">
      This application registered itself: its name is what it says it is, not checked by anyone. Authorize it only if you just started this connection yourself.
    </p>
  );
}

/**
 * The consent page of the MCP authorization server (docs/mcp.md "Sign-in and consent"): who is
 * asking (the client, where the browser goes back), what for (the resource, the scopes, each
 * can be left out but reading), and for which of the user's tenants; then Authorize or Deny.
 */
export function ConsentScreen({ uid, session, onSignOut }: { uid: string; session: Session; onSignOut(): void }) {
  const [request, setRequest] = useState<Authorization | undefined>();
  const [error, setError] = useState("");
  const [tenantId, setTenantId] = useState("");
  const [scopes, setScopes] = useState<string[]>([]);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api<Authorization>("GET", `/oauth/authorizations/${encodeURIComponent(uid)}`)
      .then((answer) => {
        setRequest(answer);
        setTenantId(answer.tenants[0]?.id ?? "");
        setScopes(answer.scopes.map((scope) => scope.name));
      })
      .catch((caught: ApiError) => setError(caught.status === 404 ? "This authorization request has expired or was already answered. Start again from the application." : caught.message));
  }, [uid]);

  const answer = async (approve: boolean) => {
    setBusy(true);
    setError("");
    try {
      const body = approve ? { approve, tenantId, scopes } : { approve };
      const { redirectTo } = await api<{ redirectTo: string }>("POST", `/oauth/authorizations/${encodeURIComponent(uid)}`, { body });
      location.assign(redirectTo);
    } catch (caught) {
      setError((caught as Error).message);
      setBusy(false);
    }
  };
  const signOut = async () => {
    await api("DELETE", "/session").catch(() => undefined);
    onSignOut();
  };

  return (
    <main class="consent" aria-labelledby="consent-title">
      <p class="who">
        Signed in as <strong>{session.user.email}</strong>{" "}
        <button type="button" class="secondary" onClick={signOut}>
          Not you? Sign out
        </button>
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {request && (
        <form
          onSubmit={(event) => {
            event.preventDefault();
            void answer(true);
          }}
        >
          <h1 id="consent-title">Authorize {request.client.name}?</h1>
          <Registration client={request.client} />
          <p>
            After you answer, your browser goes back to <strong class="mono">{request.client.redirectHost}</strong>.
          </p>
          {request.client.loopbackRedirect && (
            <p class="notice" role="note">
              That address is on this computer (localhost): any program running here could be the one asking. Continue only if you just started this from an application you trust.
            </p>
          )}
          <p>
            It asks to use{" "}
            {request.resource.server ? (
              <>
                the MCP server <strong>{request.resource.server}</strong>
              </>
            ) : (
              "the tool catalog"
            )}{" "}
            at <code>{request.resource.url}</code> on your behalf.
          </p>
          {request.tenants.length === 0 ? (
            <p class="error" role="alert">
              You are not a member of any tenant whose tools you may use.
            </p>
          ) : (
            <div class="fields">
              <label for="consent-tenant">Tenant</label>
              <select id="consent-tenant" value={tenantId} onChange={(event) => setTenantId(event.currentTarget.value)}>
                {request.tenants.map((tenant) => (
                  <option value={tenant.id} key={tenant.id}>
                    {tenant.name} ({tenant.slug}, {tenant.role})
                  </option>
                ))}
              </select>
            </div>
          )}
          <fieldset>
            <legend>It may</legend>
            {request.scopes.map((scope) => (
              <div class="row" key={scope.name}>
                <input
                  type="checkbox"
                  id={`scope-${scope.name}`}
                  checked={scopes.includes(scope.name)}
                  disabled={scope.required}
                  onChange={(event) =>
                    setScopes(event.currentTarget.checked ? [...scopes, scope.name] : scopes.filter((name) => name !== scope.name))
                  }
                />
                <label for={`scope-${scope.name}`}>
                  {scope.description} <code>{scope.name}</code>
                </label>
              </div>
            ))}
          </fieldset>
          <p class="muted">
            You can revoke this at any time under Connected apps in the console. This request expires {when(request.expiresAt)}.
          </p>
          <div class="row">
            <button type="submit" disabled={busy || request.tenants.length === 0}>
              Authorize
            </button>
            <button type="button" class="secondary" disabled={busy} onClick={() => answer(false)}>
              Deny
            </button>
          </div>
        </form>
      )}
      {!request && !error && <p class="muted">Loading…</p>}
    </main>
  );
}
