import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
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
