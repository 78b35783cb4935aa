import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore, type StoreOptions } from "../../storage/store.js";
import { redisTarget } from "../../storage/redis-setup.js";
import { startupFailure } from "../../scripts/startup-errors.js";
import { freePort, startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.js";
import { type CertificateSet, makeCertificates } from "../helpers/tls.js";
import { bearer, registerUser, startTestServer } from "../helpers/server.js";

/**
 * TLS to Redis (docs/storage.md "TLS, Sentinel and Cluster") on a real redis-server of this
 * file's own with a TLS port and `tls-auth-clients yes`: the CA and the client certificate from
 * files or from variables, and a start error that says what failed for each way TLS goes wrong.
 */
let certs: CertificateSet;
let redis: PrivateRedis;
let tlsUrl: string;

beforeAll(async () => {
  certs = await makeCertificates();
  const tlsPort = await freePort();
  redis = await startPrivateRedis([
    "--tls-port",
    String(tlsPort),
    "--tls-cert-file",
    certs.serverCertFile,
    "--tls-key-file",
    certs.serverKeyFile,
    "--tls-ca-cert-file",
    certs.caFile,
    "--tls-auth-clients",
    "yes",
  ]);
  tlsUrl = `rediss://127.0.0.1:${tlsPort}`;
}, 30_000);
afterAll(async () => {
  await redis?.stop();
  await certs?.remove();
});

const options = (extra: Partial<StoreOptions>): StoreOptions => ({
  STORAGE: "redis",
  DATA_DIR: "/nonexistent",
  REDIS_URL: tlsUrl,
  REDIS_PREFIX: "gw",
  ...extra,
});
const files = () => ({
  REDIS_TLS_CA_FILE: certs.caFile,
  REDIS_TLS_CERT_FILE: certs.clientCertFile,
  REDIS_TLS_KEY_FILE: certs.clientKeyFile,
});

/** The start's error for `extra`, and the one line a failed start prints for it. */
async function startError(extra: Partial<StoreOptions>): Promise<{ error: Error & { code?: string }; line: string }> {
  const error = await openStore(options(extra)).then(
    () => {
      throw new Error("the store opened");
    },
    (failure: Error) => failure,
  );
  return { error, line: startupFailure(error, options(extra) as unknown as Record<string, unknown>) };
}

describe("TLS with a client certificate", () => {
  it("connects with the CA, certificate and key from files, and keeps data there", async () => {
    const store = await openStore(options(files()));
    try {
      await store.kv.setItem("tls:probe", { ok: 1 });
      expect(await store.kv.getItem("tls:probe")).toEqual({ ok: 1 });
      await expect(store.probe()).resolves.toEqual({ ok: true });
      // The data went over TLS: the server counts its TLS connections' clients by name.
      const clients = (await redis.admin.client("LIST")) as string;
      expect(clients).toMatch(/name=gw:main:/);
    } finally {
      await store.close();
    }
  });

  it("connects with the PEM text in variables, one-line with \\n escapes too", async () => {
    const [ca, cert, key] = await Promise.all(
      [certs.caFile, certs.clientCertFile, certs.clientKeyFile].map((file) => readFile(file, "utf8")),
    );
    const store = await openStore(options({ REDIS_TLS_CA: ca, REDIS_TLS_CERT: cert.replace(/\n/g, "\\n"), REDIS_TLS_KEY: key }));
    try {
      await expect(store.probe()).resolves.toEqual({ ok: true });
    } finally {
      await store.close();
    }
  });

  it("serves the service's requests over it", async () => {
    const server = await startTestServer({ STORAGE: "redis", REDIS_URL: tlsUrl, REDIS_PREFIX: "gw-tls", ...files() });
    try {
      const user = await registerUser(server);
      const agents = await server.request("/gateway/v1/agents", { headers: bearer(user.token) });
      expect(agents.status).toBe(200);
      expect(await redis.admin.keys("gw-tls:*")).not.toHaveLength(0);
    } finally {
      await server.close();
    }
  });
});

describe("a TLS failure says what failed", () => {
  it("a server certificate not trusted names REDIS_TLS_CA", async () => {
    const { error, line } = await startError({ REDIS_TLS_CERT_FILE: certs.clientCertFile, REDIS_TLS_KEY_FILE: certs.clientKeyFile });
    expect(error.message).toMatch(/its TLS certificate is not trusted .*set REDIS_TLS_CA\(_FILE\) to the CA that signed it/);
    expect(line).toMatch(/^Invalid configuration: REDIS_TLS_CA: Redis at rediss:\/\/127\.0\.0\.1:\d+: its TLS certificate is not trusted/);
    expect(line).not.toContain("did not answer");
    // A CA that did not sign it.
    const other = await startError({ ...files(), REDIS_TLS_CA_FILE: certs.strangerCertFile });
    expect(other.error.message).toMatch(/not trusted .*REDIS_TLS_CA\(_FILE\) does not hold the CA that signed it/);
    expect(other.line).toContain(`REDIS_TLS_CA_FILE=${certs.strangerCertFile}`);
  });

  it("no client certificate, or one of another CA, names REDIS_TLS_CERT", async () => {
    const missing = await startError({ REDIS_TLS_CA_FILE: certs.caFile });
    expect(missing.error.message).toMatch(/wants a TLS client certificate .*set REDIS_TLS_CERT\(_FILE\) and REDIS_TLS_KEY\(_FILE\)/);
    expect(missing.line).toMatch(/^Invalid configuration: REDIS_TLS_CERT: /);
    const refused = await startError({
      ...files(),
      REDIS_TLS_CERT_FILE: certs.strangerCertFile,
      REDIS_TLS_KEY_FILE: certs.strangerKeyFile,
    });
    expect(refused.error.message).toMatch(/refused the TLS client certificate/);
    expect(refused.line).toContain(`REDIS_TLS_CERT_FILE=${certs.strangerCertFile}`);
  });

  it("plain redis:// to the TLS port suggests rediss://", async () => {
    const { error, line } = await startError({ REDIS_URL: tlsUrl.replace("rediss:", "redis:") });
    expect(error.code).toBe("REDIS_UNREACHABLE");
    expect(line).toMatch(/closed the connection .*if it is a TLS port \(tls-port\), use rediss:\/\//);
  });

  it("settings that cannot work stop the start before connecting, naming the setting", () => {
    const check = (extra: Partial<StoreOptions>) => {
      try {
        redisTarget(options(extra));
      } catch (error) {
        return `${(error as { variable: string }).variable}: ${(error as Error).message}`;
      }
      return "accepted";
    };
    expect(check(files())).toBe("accepted");
    expect(check({ ...files(), REDIS_TLS_KEY_FILE: undefined })).toMatch(/^REDIS_TLS_KEY: .*REDIS_TLS_KEY\(_FILE\) is not set/);
    expect(check({ ...files(), REDIS_TLS_CA: "x" })).toBe("REDIS_TLS_CA: set either REDIS_TLS_CA or REDIS_TLS_CA_FILE, not both");
    expect(check({ ...files(), REDIS_TLS_CA_FILE: `${certs.dir}/nothing.pem` })).toMatch(
      /^REDIS_TLS_CA_FILE: .*nothing\.pem cannot be read \(ENOENT\)/,
    );
    expect(check({ ...files(), REDIS_TLS_CA_FILE: certs.clientKeyFile })).toMatch(/^REDIS_TLS_CA_FILE: does not hold a PEM CA certificate/);
    expect(check({ ...files(), REDIS_TLS_KEY_FILE: certs.strangerKeyFile })).toBe(
      "REDIS_TLS_KEY_FILE: is not the key of the client certificate in REDIS_TLS_CERT_FILE",
    );
    const notKey = check({
      ...files(),
      REDIS_TLS_KEY: "-----BEGIN PRIVATE KEY-----\nsecret-ish\n-----END PRIVATE KEY-----",
      REDIS_TLS_KEY_FILE: undefined,
    });
    expect(notKey).toMatch(/^REDIS_TLS_KEY: does not hold a PEM private key/);
    expect(notKey).not.toContain("secret-ish");
    expect(check({ ...files(), REDIS_URL: "redis://127.0.0.1:6379" })).toBe(
      "REDIS_URL: REDIS_TLS_CA_FILE is set but REDIS_URL is not TLS: start it with rediss://",
    );
  });
});
