import { randomBytes } from "node:crypto";
import * as v from "valibot";
import { LOCAL_ADMIN } from "../auth.js";
import { redirectUriRefusal } from "../credentials/oauth-resource.js";
import { oauthDomain } from "./deps.js";

const ClientView = v.object({
  clientId: v.string(),
  name: v.string(),
  redirectUris: v.array(v.string()),
  applicationType: v.string(),
  confidential: v.boolean(),
});

const RedirectUri = v.pipe(
  v.string("redirect URIs are strings"),
  v.maxLength(2048),
  v.check(
    (uri) => redirectUriRefusal(uri) === undefined,
    "a redirect URI must be https, http on a loopback address, or a native app's own scheme",
  ),
);

interface StoredClient {
  client_id: string;
  client_name?: string;
  redirect_uris?: string[];
  application_type?: string;
  token_endpoint_auth_method?: string;
}

const view = (client: StoredClient) => ({
  clientId: client.client_id,
  name: client.client_name ?? client.client_id,
  redirectUris: client.redirect_uris ?? [],
  applicationType: client.application_type ?? "web",
  confidential: client.token_endpoint_auth_method !== undefined && client.token_endpoint_auth_method !== "none",
});

export const operatorOAuthClientsAdd = oauthDomain.method({
  name: "operator.oauth.clients.add",
  summary: "Registers an OAuth client of the MCP authorization server; a confidential client's secret is in this answer only.",
  input: v.object({
    name: v.pipe(v.string("name must be a string"), v.trim(), v.minLength(1, "name is required"), v.maxLength(100)),
    redirectUris: v.pipe(v.array(RedirectUri), v.minLength(1, "at least one redirect URI"), v.maxLength(20)),
    applicationType: v.optional(v.picklist(["web", "native"]), "web"),
    confidential: v.optional(v.boolean(), false),
  }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ ...ClientView.entries, clientSecret: v.optional(v.string()) }),
  async handler(params, ctx) {
    const clientId = `gw-${randomBytes(12).toString("base64url")}`;
    const clientSecret = params.confidential ? randomBytes(32).toString("base64url") : undefined;
    const metadata = {
      client_id: clientId,
      client_name: params.name,
      redirect_uris: params.redirectUris,
      application_type: params.applicationType,
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: clientSecret ? "client_secret_basic" : "none",
      ...(clientSecret ? { client_secret: clientSecret } : {}),
    };
    await ctx.deps.records.upsert("Client", clientId, metadata);
    await ctx.deps.records.markOperatorClient(clientId, true);
    return { ...view(metadata), ...(clientSecret ? { clientSecret } : {}) };
  },
});

export const operatorOAuthClientsList = oauthDomain.method({
  name: "operator.oauth.clients.list",
  summary: "The OAuth clients operators registered (never their secrets).",
  input: v.object({}),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ clients: v.array(ClientView) }),
  async handler(_params, ctx) {
    const clients: StoredClient[] = [];
    for (const id of await ctx.deps.records.operatorClientIds()) {
      const client = await ctx.deps.records.find("Client", id);
      if (client) clients.push(client as unknown as StoredClient);
    }
    return { clients: clients.map(view) };
  },
});

export const operatorOAuthClientsRemove = oauthDomain.method({
  name: "operator.oauth.clients.remove",
  summary:
    "Removes an operator's OAuth client: it can no longer authorize or refresh (its access tokens run out within OAUTH_ACCESS_TOKEN_SECONDS).",
  input: v.object({ clientId: v.pipe(v.string("clientId must be a string"), v.minLength(1), v.maxLength(200)) }),
  auth: LOCAL_ADMIN,
  internal: true,
  http: [],
  output: v.object({ success: v.boolean(), clientId: v.string() }),
  errors: { NOT_FOUND: { message: "No OAuth client an operator registered has this id" } },
  async handler(params, ctx) {
    if (!(await ctx.deps.records.operatorClientIds()).includes(params.clientId)) return ctx.fail("NOT_FOUND");
    await ctx.deps.records.destroy("Client", params.clientId);
    await ctx.deps.records.markOperatorClient(params.clientId, false);
    return { success: true, clientId: params.clientId };
  },
});

/**
 * OAuth clients an operator registers ahead (docs/mcp.md "Clients"): for a client that can be
 * configured with a client id (and secret) and uses neither a metadata document nor dynamic
 * registration. Internal methods of the admin command (`npm run admin -- add-oauth-client`);
 * the record is the client's RFC 7591 metadata, its secret sealed at rest.
 */
export const clientMethods = [operatorOAuthClientsAdd, operatorOAuthClientsList, operatorOAuthClientsRemove];
