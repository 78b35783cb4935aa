import { Fragment, type ComponentChildren } from "preact";
import { useEffect, useId, useState } from "preact/hooks";
import { api, ApiError, firstGet, when, type ConsoleKey } from "./api.js";

/** "" means no limit (null), anything else must be a number (the API says what is wrong with it). */
function limitValue(text: string): number | null | string {
  const trimmed = text.trim();
  if (trimmed === "") return null;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : trimmed;
}

function limitText(value: number | null): string {
  return value === null ? "" : String(value);
}

const number = (value: number) => value.toLocaleString("en-US");

/** A key's limits as users read them (docs/console.md): "5 credits", "60 requests a minute", "No limit". */
export function spendLimitWords(value: number | null): string {
  return value === null ? "No limit" : `${number(value)} ${value === 1 ? "credit" : "credits"}`;
}

export function perMinuteWords(value: number | null, unit: "request" | "token"): string {
  return value === null ? "No limit" : `${number(value)} ${unit}${value === 1 ? "" : "s"} a minute`;
}

/** A secret just created: shown once, with a copy button, until the user dismisses it. */
export function NewSecret({ secret, name, usage, onDone }: { secret: string; name: string; usage?: ComponentChildren; onDone(): void }) {
  const [copied, setCopied] = useState("");
  const fieldId = `secret-${useId()}`;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret);
      setCopied("Copied to the clipboard.");
    } catch {
      const field = document.getElementById(fieldId) as HTMLInputElement | null;
      field?.select();
      setCopied("Select the key above and copy it (Ctrl+C).");
    }
  };
  return (
    <section class="secret" aria-labelledby={`${fieldId}-title`}>
      <h3 id={`${fieldId}-title`}>Key “{name}” created</h3>
      <p class="warning" role="alert">
        Copy this key now: <strong>you will not see it again.</strong> Store it in your application's secrets, not in code.
      </p>
      <label for={fieldId}>Your new API key</label>
      <div class="row">
        <input id={fieldId} readOnly value={secret} class="mono" onFocus={(event) => (event.currentTarget as HTMLInputElement).select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p aria-live="polite" class="muted">
        {copied}
      </p>
      <p class="muted">
        {usage ?? (
          <>
            Use it as <code>Authorization: Bearer &lt;key&gt;</code> with any OpenAI-compatible client at <code>{location.origin}/api/v1</code>.
          </>
        )}
      </p>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </section>
  );
}

function EditKey({ keyRecord, workspaceId, onSaved, onCancel }: { keyRecord: ConsoleKey; workspaceId: string; onSaved(): void; onCancel(): void }) {
  const [name, setName] = useState(keyRecord.name);
  const [spend, setSpend] = useState(limitText(keyRecord.spendLimit));
  const [rpm, setRpm] = useState(limitText(keyRecord.rpmLimit));
  const [tpm, setTpm] = useState(limitText(keyRecord.tpmLimit));
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const save = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError("");
    try {
      await api("PATCH", `/api-keys/${encodeURIComponent(keyRecord.id)}`, {
        body: { name, spendLimit: limitValue(spend), rpmLimit: limitValue(rpm), tpmLimit: limitValue(tpm), workspaceId },
      });
      onSaved();
    } catch (caught) {
      setError((caught as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const id = `edit-${keyRecord.id}`;
  return (
    <form class="edit" onSubmit={save} aria-label={`Edit key ${keyRecord.name}`}>
      <div class="fields">
        <label for={`${id}-name`}>Name</label>
        <input id={`${id}-name`} value={name} onInput={(event) => setName(event.currentTarget.value)} />
        <label for={`${id}-spend`}>Spend limit (credits, empty = none)</label>
        <input id={`${id}-spend`} inputMode="decimal" value={spend} aria-describedby={`${id}-limits-help`} onInput={(event) => setSpend(event.currentTarget.value)} />
        <label for={`${id}-rpm`}>Requests per minute (empty = none)</label>
        <input id={`${id}-rpm`} inputMode="numeric" value={rpm} aria-describedby={`${id}-limits-help`} onInput={(event) => setRpm(event.currentTarget.value)} />
        <label for={`${id}-tpm`}>Tokens per minute (empty = none)</label>
        <input id={`${id}-tpm`} inputMode="numeric" value={tpm} aria-describedby={`${id}-limits-help`} onInput={(event) => setTpm(event.currentTarget.value)} />
      </div>
      <p class="muted" id={`${id}-limits-help`}>
        The spend limit counts credits over the key's whole life; the other two count each minute. A request is served while
        something of each limit is left and is charged what it really used, so the last request can go a little past a limit;
        after that the key gets 402 (spend) or 429 (per minute) until the limit is raised or the minute ends.
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <div class="row">
        <button type="submit" disabled={busy}>
          Save
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

export function KeysPanel({ workspaceId, isDefault, onChange }: { workspaceId: string; isDefault: boolean; onChange(): void }) {
  const [keys, setKeys] = useState<ConsoleKey[] | undefined>();
  const [error, setError] = useState("");
  const [name, setName] = useState("");
  const [expires, setExpires] = useState("");
  const [created, setCreated] = useState<{ secret: string; name: string } | undefined>();
  const [editing, setEditing] = useState<string | undefined>();
  const [confirming, setConfirming] = useState<string | undefined>();
  const [status, setStatus] = useState("");

  const load = async (first = false) => {
    try {
      const answer = first && isDefault ? await firstGet<{ data: ConsoleKey[] }>("/api-keys") : await api<{ data: ConsoleKey[] }>("GET", "/api-keys", { query: { workspaceId } });
      setKeys(answer.data);
      setError("");
    } catch (caught) {
      if ((caught as ApiError).status !== 401) setError((caught as Error).message);
    }
  };
  useEffect(() => {
    setKeys(undefined);
    setCreated(undefined);
    void load(true);
  }, [workspaceId]);

  const create = async (event: Event) => {
    event.preventDefault();
    setError("");
    try {
      const body: Record<string, unknown> = { name, workspaceId };
      if (expires) body.expiresAt = new Date(`${expires}T23:59:59`).toISOString();
      const answer = await api<{ key: string; name: string }>("POST", "/api-keys", { body });
      setCreated({ secret: answer.key, name: answer.name });
      setName("");
      setExpires("");
      await load();
      onChange();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };

  const revoke = async (record: ConsoleKey) => {
    try {
      await api("DELETE", `/api-keys/${encodeURIComponent(record.id)}`, { query: { workspaceId } });
      setConfirming(undefined);
      setStatus(`Key “${record.name}” revoked.`);
      await load();
      onChange();
    } catch (caught) {
      setError((caught as Error).message);
    }
  };

  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">Platform API keys</h2>
      <form class="create" onSubmit={create}>
        <div class="fields">
          <label for="new-key-name">Key name</label>
          <input id="new-key-name" required maxLength={100} value={name} placeholder="e.g. production backend" onInput={(event) => setName(event.currentTarget.value)} />
          <label for="new-key-expires">Expires on (optional)</label>
          <input id="new-key-expires" type="date" value={expires} onInput={(event) => setExpires(event.currentTarget.value)} />
        </div>
        <button type="submit">Create key</button>
      </form>
      {created && <NewSecret secret={created.secret} name={created.name} onDone={() => setCreated(undefined)} />}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p aria-live="polite" class="muted">
        {status}
      </p>
      {keys === undefined ? (
        <p class="muted">Loading keys…</p>
      ) : keys.length === 0 ? (
        <p class="muted" id="no-keys">
          No keys yet. Create one above to call the API.
        </p>
      ) : (
        <div class="scroll">
          <table aria-label="Platform API keys" id="key-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">Scopes</th>
                <th scope="col">Spend limit</th>
                <th scope="col">Requests per minute</th>
                <th scope="col">Tokens per minute</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.map((record) => (
                <Fragment key={record.id}>
                  <tr data-key-id={record.id}>
                    <th scope="row">{record.name}</th>
                    <td>{when(record.createdAt)}</td>
                    <td>{when(record.lastUsedAt)}</td>
                    <td>{when(record.expiresAt)}</td>
                    <td>{record.scopes.join(", ")}</td>
                    <td>{spendLimitWords(record.spendLimit)}</td>
                    <td>{perMinuteWords(record.rpmLimit, "request")}</td>
                    <td>{perMinuteWords(record.tpmLimit, "token")}</td>
                    <td class="actions">
                      <button type="button" class="secondary" aria-label={`Edit ${record.name}`} onClick={() => setEditing(editing === record.id ? undefined : record.id)}>
                        Edit
                      </button>
                      <button type="button" class="danger" aria-label={`Revoke ${record.name}`} onClick={() => setConfirming(record.id)}>
                        Revoke
                      </button>
                    </td>
                  </tr>
                  {editing === record.id && (
                    <tr>
                      <td colSpan={9}>
                        <EditKey
                          keyRecord={record}
                          workspaceId={workspaceId}
                          onCancel={() => setEditing(undefined)}
                          onSaved={() => {
                            setEditing(undefined);
                            setStatus(`Key “${record.name}” saved.`);
                            void load();
                          }}
                        />
                      </td>
                    </tr>
                  )}
                  {confirming === record.id && (
                    <tr>
                      <td colSpan={9}>
                        <div class="confirm" role="alertdialog" aria-labelledby={`confirm-${record.id}`}>
                          <p id={`confirm-${record.id}`}>
                            Revoke “{record.name}”? Every request with it is refused from now on. This cannot be undone.
                          </p>
                          <div class="row">
                            <button type="button" class="danger" onClick={() => revoke(record)}>
                              Yes, revoke “{record.name}”
                            </button>
                            <button type="button" class="secondary" onClick={() => setConfirming(undefined)}>
                              Cancel
                            </button>
                          </div>
                        </div>
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
