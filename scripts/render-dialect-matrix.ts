import { readFileSync, writeFileSync } from "node:fs";
import { matrixMarkdown } from "../rpc/chat/translate/matrix.js";

/**
 * Writes the dialect matrix (rpc/chat/translate/matrix.ts) into docs/dialects.md between its
 * markers; test/rpc/chat/dialect-matrix.test.ts fails while the page and the table differ.
 * Run with `npm run docs:matrix` after changing the table.
 */
const path = new URL("../docs/dialects.md", import.meta.url);
const page = readFileSync(path, "utf8");
const next = page.replace(/(<!-- matrix:start -->\n)[\s\S]*?(\n<!-- matrix:end -->)/, `$1${matrixMarkdown()}$2`);
if (next === page) console.log("docs/dialects.md: the matrix is up to date");
else {
  writeFileSync(path, next);
  console.log("docs/dialects.md: the matrix is rewritten");
}
