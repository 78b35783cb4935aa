#!/usr/bin/env node
// Fails when a source line is longer than LIMIT characters. The formatter (Biome, lineWidth 140)
// wraps code; this also catches what it leaves alone: comments, long strings and templates.
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";

const LIMIT = 200;
const files = execFileSync("git", ["ls-files", "*.ts", "*.tsx", "*.mts", "*.mjs", "*.cjs"], { encoding: "utf8" })
  .split("\n")
  .filter((file) => file && !file.startsWith("test/conformance/") && !file.startsWith("docs/"));
const long = [];
for (const file of files) {
  const lines = readFileSync(file, "utf8").split("\n");
  lines.forEach((line, index) => {
    if (line.length > LIMIT) long.push(`${file}:${index + 1}: ${line.length} characters`);
  });
}
if (long.length) {
  process.stderr.write(`${long.length} lines longer than ${LIMIT} characters:\n${long.join("\n")}\n`);
  process.exit(1);
}
process.stdout.write(`line length: ${files.length} files, no line over ${LIMIT} characters\n`);
