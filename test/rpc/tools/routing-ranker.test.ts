import { describe, expect, it } from "vitest";
import { BuiltinSource } from "../../../bridge/builtin/source.js";
import { buildIndex, rank, type RoutableTool } from "../../../rpc/tools/routing/ranker.js";
import { stem, terms, words } from "../../../rpc/tools/routing/tokenize.js";
import { splitClauses } from "../../../rpc/tools/routing/clauses.js";
import { extractArgs, extractExpression } from "../../../rpc/tools/routing/args.js";

const builtins: RoutableTool[] = (await new BuiltinSource().list()).map((tool) => ({
  server: "builtin",
  name: tool.name,
  localName: tool.name,
  description: tool.description,
  category: tool.category,
  inputSchema: tool.inputSchema,
}));

const vmTool = (name: string, description: string, properties: Record<string, unknown> = {}, category = "vm"): RoutableTool => ({
  server: "vm:box-1",
  name: `vm__box-1__${name}`,
  localName: name,
  description,
  category,
  inputSchema: { type: "object", properties },
});

const vmTools = [
  vmTool(
    "grepFiles",
    "Searches files in the workspace for lines matching a regular expression.",
    {
      pattern: { type: "string", description: "Regular expression" },
      path: { type: "string", description: "Directory to search" },
    },
    "files",
  ),
  vmTool(
    "read_file",
    "Reads a file from the VM's disk and returns its contents.",
    { path: { type: "string", description: "File path" } },
    "files",
  ),
  vmTool(
    "git_commit",
    "Commits staged changes in the repository with a message.",
    { message: { type: "string", description: "Commit message" } },
    "git",
  ),
  vmTool(
    "run_shell",
    "Runs a shell command on the VM and returns stdout and stderr.",
    { command: { type: "string", description: "Command line" } },
    "shell",
  ),
];

const index = buildIndex([...builtins, ...vmTools]);
const top = (query: string) => rank(index, query)[0]?.tool.name;

describe("tokenizer", () => {
  it("splits snake, camel, kebab and namespaced identifiers", () => {
    expect(words("grepFiles")).toEqual(["grep", "files"]);
    expect(words("vm__box-1__read_file")).toEqual(["vm", "box", "1", "read", "file"]);
    expect(words("HTTPServer current_time")).toEqual(["http", "server", "current", "time"]);
  });

  it("folds plurals and verb forms to one stem and drops stop words", () => {
    expect(new Set(["fetch", "fetches", "fetching", "fetched"].map(stem))).toEqual(new Set(["fetch"]));
    expect(stem("files")).toBe(stem("file"));
    // Stems are index keys, not words: "Paris" and "pari" meet because both sides are stemmed alike.
    expect(terms("What is the time in Paris?")).toEqual(["time", stem("paris")]);
  });
});

describe("BM25 ranking", () => {
  it.each([
    ["what time is it in Tokyo right now", "current_time"],
    ["current date in Europe/Paris timezone", "current_time"],
    ["calculate 2 * (3 + 4)", "calculator"],
    ["evaluate this arithmetic expression: sqrt(16) + 1", "calculator"],
    ["fetch https://example.com and show me the page", "http_fetch"],
    ["download a web page over HTTP", "http_fetch"],
    ["count the words and sentences in this text", "text_stats"],
    ["search the workspace files for TODO", "vm__box-1__grepFiles"],
    ["read the file /etc/hosts", "vm__box-1__read_file"],
    ["commit my changes to the repository", "vm__box-1__git_commit"],
    ["run the shell command ls -la", "vm__box-1__run_shell"],
  ])("%s → %s", (query, expected) => {
    expect(top(query)).toBe(expected);
  });

  it("scores are positive, sorted, and list the matched terms", () => {
    const ranked = rank(index, "read the file contents");
    expect(ranked.length).toBeGreaterThan(1);
    expect(ranked.every((entry) => entry.score > 0)).toBe(true);
    for (let i = 1; i < ranked.length; i++) expect(ranked[i - 1]!.score).toBeGreaterThanOrEqual(ranked[i]!.score);
    expect(ranked[0]!.matched).toEqual(expect.arrayContaining(["read", "file"]));
  });

  it("finds nothing for words no tool uses, and for an empty query", () => {
    expect(rank(index, "zebra quokka")).toEqual([]);
    expect(rank(index, "the of and")).toEqual([]);
    expect(rank(buildIndex([]), "time")).toEqual([]);
  });

  it("a rare term weighs more than a common one (idf)", () => {
    const tools = [vmTool("alpha", "shared shared words rare"), vmTool("beta", "shared words"), vmTool("gamma", "shared words")];
    const ranked = rank(buildIndex(tools), "shared rare");
    expect(ranked[0]!.tool.localName).toBe("alpha");
    expect(ranked[0]!.score).toBeGreaterThan(ranked[1]!.score * 2);
  });

  it("a word in the name counts more than the same word in a description", () => {
    const tools = [vmTool("deploy", "Ships the build."), vmTool("ship", "Runs the deploy pipeline for the build.")];
    expect(rank(buildIndex(tools), "deploy")[0]!.tool.localName).toBe("deploy");
  });

  it("honours the filter and the limit", () => {
    expect(rank(index, "file", { filter: (tool) => tool.server === "builtin" }).every((entry) => entry.tool.server === "builtin")).toBe(
      true,
    );
    expect(rank(index, "file time text", { limit: 2 })).toHaveLength(2);
  });
});

describe("clauses and arguments", () => {
  it("splits on then, and then, semicolons and finally, never inside quotes", () => {
    expect(splitClauses("fetch https://a.example then count the words; and then tell me the time, finally compute 1+1")).toEqual([
      "fetch https://a.example",
      "count the words",
      "tell me the time",
      "compute 1+1",
    ]);
    expect(splitClauses('count the words in "this and then that"')).toEqual(['count the words in "this and then that"']);
  });

  it("reads expressions, URLs, timezones and numbers the schema asks for", () => {
    expect(extractExpression("please calculate 2 * (3 + 4) for me")).toBe("2 * (3 + 4)");
    expect(extractExpression("what is 12 plus 30 times 2")).toBe("12 + 30 * 2");
    expect(extractExpression("step 2 of the plan")).toBeUndefined();
    const calc = builtins.find((tool) => tool.name === "calculator")!;
    expect(extractArgs(calc.inputSchema, "compute sqrt(16) + 2^3")).toEqual({ args: { expression: "sqrt(16) + 2^3" }, missing: [] });
    expect(extractArgs(calc.inputSchema, "compute something")).toEqual({ args: {}, missing: ["expression"] });
    const time = builtins.find((tool) => tool.name === "current_time")!;
    expect(extractArgs(time.inputSchema, "what time is it in America/New_York").args).toEqual({ timezone: "America/New_York" });
    const fetchTool = builtins.find((tool) => tool.name === "http_fetch")!;
    expect(extractArgs(fetchTool.inputSchema, "POST to https://example.com/api, max bytes 100").args).toEqual({
      url: "https://example.com/api",
      method: "POST",
      max_bytes: 100,
    });
    const stats = builtins.find((tool) => tool.name === "text_stats")!;
    expect(extractArgs(stats.inputSchema, 'count the words of "to be or not to be", top 2').args).toEqual({
      text: "to be or not to be",
      top: 2,
    });
  });
});
