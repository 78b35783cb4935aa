import { pick } from "../module.js";
import { workspacesDomain } from "./deps.js";
import { workspaceMethods } from "./methods.js";
import { artifactMethods } from "./artifact-methods.js";
import { operatorWorkspaceMethods } from "./operator-methods.js";

/** Workspaces and their files (docs/tenants.md "Artifacts"). */
export const workspacesModule = workspacesDomain.module({
  methods: [...workspaceMethods, ...artifactMethods, ...operatorWorkspaceMethods],
  init: (ports) => ({
    ...pick(ports, ["config", "log", "sink"]),
    ...pick(ports.repos, ["users", "tenants", "members", "agents", "artifacts", "credits", "keys"]),
  }),
});
