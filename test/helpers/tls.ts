import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

export interface HttpsSite {
  /** `https://127.0.0.1:<port>` */
  origin: string;
  /** The certificate's file, for NODE_EXTRA_CA_CERTS of the processes that must trust it. */
  certificateFile: string;
  close(): Promise<void>;
}

/**
 * An HTTPS server on loopback with a fresh self-signed certificate for 127.0.0.1 (made with
 * openssl), serving `documents` by path as JSON: a Client ID Metadata Document host, which the
 * draft requires to be https.
 */
export async function serveHttpsDocuments(documents: (origin: string) => Record<string, unknown>): Promise<HttpsSite> {
  const dir = await mkdtemp(join(tmpdir(), "oauth-tls-"));
  const certificateFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  await promisify(execFile)("openssl", [
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=127.0.0.1",
    "-addext",
    "subjectAltName=IP:127.0.0.1",
    "-keyout",
    keyFile,
    "-out",
    certificateFile,
  ]);
  let origin = "";
  const server: Server = createServer({ cert: await readFile(certificateFile), key: await readFile(keyFile) }, (req, res) => {
    const document = documents(origin)[req.url ?? ""];
    if (!document) return res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=60" }).end(JSON.stringify(document));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    certificateFile,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface CertificateSet {
  dir: string;
  /** The CA that signed the server's and the client's certificates. */
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  /** A client certificate of another CA, which a server trusting `caFile` refuses. */
  strangerCertFile: string;
  strangerKeyFile: string;
  remove(): Promise<void>;
}

/**
 * A fresh CA (P-256, one day) with a server certificate for 127.0.0.1 and a client certificate
 * it signed, plus a client certificate of a second CA: the files a TLS Redis with
 * `tls-auth-clients yes` and its clients need, made with openssl in a directory of their own.
 */
export async function makeCertificates(): Promise<CertificateSet> {
  const dir = await mkdtemp(join(tmpdir(), "redis-tls-"));
  const run = (args: string[]) => promisify(execFile)("openssl", args, { cwd: dir });
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  const ca = async (name: string) =>
    run(["req", "-x509", ...ec, "-days", "1", "-subj", `/CN=${name}`, "-keyout", `${name}.key`, "-out", `${name}.crt`]);
  const signed = async (name: string, by: string, subject: string, extension: string) => {
    await run(["req", ...ec, "-subj", subject, "-keyout", `${name}.key`, "-out", `${name}.csr`]);
    await writeFile(join(dir, `${name}.ext`), `${extension}\n`);
    await run([
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      `${by}.crt`,
      "-CAkey",
      `${by}.key`,
      "-CAcreateserial",
      "-days",
      "1",
      "-extfile",
      `${name}.ext`,
      "-out",
      `${name}.crt`,
    ]);
  };
  await Promise.all([ca("ca"), ca("stranger-ca")]);
  await Promise.all([
    signed("server", "ca", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
    signed("client", "ca", "/CN=gateway", "extendedKeyUsage=clientAuth"),
    signed("stranger", "stranger-ca", "/CN=stranger", "extendedKeyUsage=clientAuth"),
  ]);
  const file = (name: string) => join(dir, name);
  return {
    dir,
    caFile: file("ca.crt"),
    serverCertFile: file("server.crt"),
    serverKeyFile: file("server.key"),
    clientCertFile: file("client.crt"),
    clientKeyFile: file("client.key"),
    strangerCertFile: file("stranger.crt"),
    strangerKeyFile: file("stranger.key"),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
