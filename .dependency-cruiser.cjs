/**
 * The import rule (docs/architecture.md): transports (`facade`, `bridge`) → the `rpc` core and
 * domains → `storage`. Only the composition root (`facade/server.ts`) wires `bridge` in.
 * Run by `npm test` (`npm run lint:imports`).
 */

/**
 * The domains of rpc/, lowest first, read from the ordered list in rpc/modules.ts (so adding a
 * domain there is the only place its rank is written). A domain imports only domains before it
 * (docs/architecture.md "Domain modules").
 */
const DOMAINS = (() => {
  const source = require("node:fs").readFileSync(require("node:path").join(__dirname, "rpc/modules.ts"), "utf8");
  const folderOf = new Map();
  for (const [, names, folder] of source.matchAll(/import \{([^}]+)\} from "\.\/([\w-]+)\/index\.js";/g)) {
    for (const name of names.split(",")) folderOf.set(name.trim(), folder);
  }
  const list = /return \[([\s\S]*?)\];/.exec(source)[1];
  const order = [];
  for (const [name] of list.matchAll(/\b\w+Module\b/g)) {
    const folder = folderOf.get(name);
    if (folder && !order.includes(folder)) order.push(folder);
  }
  if (order.length === 0) throw new Error("No domain modules found in rpc/modules.ts");
  return order;
})();

/** The core: rpc/*.ts at the top (but the composition: compose.ts, modules.ts) and its folders. */
const CORE = "^rpc/([^/]+\\.ts|credentials/|policies/|outbound/)";
const COMPOSITION = "^rpc/(compose|modules)\\.ts$";

const domainOrder = DOMAINS.slice(0, -1).map((domain, index) => ({
  name: `domain-order-${domain}`,
  comment: `rpc/${domain}/ imports only the domains below it: ${DOMAINS.slice(0, index).join(", ") || "none"}.`,
  severity: "error",
  from: { path: `^rpc/${domain}/` },
  to: { path: `^rpc/(${DOMAINS.slice(index + 1).join("|")})/` },
}));

module.exports = {
  forbidden: [
    {
      name: "core-imports-no-domain",
      comment: "The core (dispatcher, auth, define, module, …) never imports a domain; domains reach each other through init ports.",
      severity: "error",
      from: { path: CORE, pathNot: COMPOSITION },
      to: { path: `^rpc/(${DOMAINS.join("|")})/` },
    },
    ...domainOrder,
    {
      name: "rpc-imports-no-http",
      comment: "rpc/ never imports an HTTP server library; the shared HTTP pieces live with the transports.",
      severity: "error",
      from: { path: "^rpc/" },
      to: { path: "(^|node_modules/)(h3|srvx|crossws)($|/)" },
    },
    {
      name: "storage-imports-nothing-above",
      comment: "storage/ holds drivers, atomic primitives, the bus and repositories; it knows nothing of its callers.",
      severity: "error",
      from: { path: "^storage/" },
      to: { path: "^(rpc|facade|bridge|scripts|bench|mocks)/" },
    },
    {
      name: "rpc-imports-no-transport",
      comment: "rpc/ (core and domains) never imports a transport; it reaches the tool catalog through the ports on services.",
      severity: "error",
      from: { path: "^rpc/" },
      to: { path: "^(facade|bridge|scripts|bench|mocks)/" },
    },
    {
      name: "bridge-imports-no-facade",
      comment: "bridge/ is a transport beside facade/: both import rpc and storage, never each other.",
      severity: "error",
      from: { path: "^bridge/" },
      // facade/transport/ is the shared HTTP layer of both transports.
      to: { path: "^(facade|scripts|bench|mocks)/", pathNot: "^facade/transport/" },
    },
    {
      name: "facade-imports-no-bridge",
      comment: "facade/ is generated from the registry; only the composition root may wire bridge transports in.",
      severity: "error",
      from: { path: "^facade/", pathNot: "^facade/server\\.ts$" },
      to: { path: "^(bridge|scripts|bench|mocks)/" },
    },
    {
      name: "keys-live-in-storage",
      comment:
        "Storage keys are built by repositories: code above storage/ uses repositories, not the raw atomic primitives (types may be shared).",
      severity: "error",
      from: { path: "^(rpc|facade|bridge)/" },
      to: { path: "^storage/(atomic|redis-atomic)\\.ts$", dependencyTypesNot: ["type-only"] },
    },
    {
      name: "no-internal-from-outside",
      comment: "A file in an internal/ folder is private to the folder that holds it.",
      severity: "error",
      from: { path: "^(.+)/" },
      to: { path: "^(.+)/internal/", pathNot: "^$1/internal/" },
    },
    {
      name: "no-circular",
      severity: "error",
      from: { path: "^(rpc|facade|storage|bridge)/" },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    exclude: { path: "^(test|bench|scripts|mocks)/" },
  },
};
