import { updatesDomain } from "./deps.js";
import { updateMethods } from "./methods.js";

/** Component releases and their rollouts (docs/updates.md). */
export const updatesModule = updatesDomain.module({
  methods: updateMethods,
  init: ({ config, repos }) => ({ config, releases: repos.releases }),
});
