import * as v from "valibot";
import { describe, expect, it } from "vitest";
import { AllowPatterns, allowedBy, matchesAny } from "../../rpc/allow-list.js";
import { redacted } from "../../rpc/audit.js";

describe("allow-list patterns (docs/access-control.md)", () => {
  it("match whole names, with * for any run and ? for one character, and nothing else special", () => {
    expect(matchesAny(["gpt-4*"], "gpt-4o-mini")).toBe(true);
    expect(matchesAny(["gpt-4*"], "gpt-40")).toBe(true);
    expect(matchesAny(["gpt-4*"], "my-gpt-4")).toBe(false);
    expect(matchesAny(["echo-?"], "echo-1")).toBe(true);
    expect(matchesAny(["echo-?"], "echo-10")).toBe(false);
    expect(matchesAny(["a.b"], "axb")).toBe(false);
    expect(matchesAny(["a+b"], "a+b")).toBe(true);
    expect(matchesAny(["a+b"], "aab")).toBe(false);
    expect(matchesAny(["github__*"], "github__issues")).toBe(true);
    expect(matchesAny([], "anything")).toBe(false);
  });

  it("allow a name only when every list present allows it", () => {
    expect(allowedBy(undefined, "x")).toBe(true);
    expect(allowedBy([], "x")).toBe(true);
    expect(allowedBy([["echo-*"], ["*-2"]], "echo-2")).toBe(true);
    expect(allowedBy([["echo-*"], ["*-2"]], "echo-1")).toBe(false);
  });

  it("are validated: characters, length, count; null removes a list; duplicates go", () => {
    const schema = AllowPatterns("allowedModels");
    expect(v.parse(schema, ["a", "a", " b "])).toEqual(["a", "b"]);
    expect(v.parse(schema, null)).toBeNull();
    for (const bad of [["a b"], [""], ["x".repeat(129)], ["(a|b)"], "a", Array.from({ length: 101 }, (_, i) => `m${i}`)]) {
      expect(v.safeParse(schema, bad).success, JSON.stringify(bad).slice(0, 40)).toBe(false);
    }
  });
});

describe("audit redaction (docs/audit.md)", () => {
  it("keeps secret-named fields out, masks URL passwords and cuts long strings", () => {
    const out = redacted({
      name: "n",
      secret: "s3cr3t",
      headers: { authorization: "Bearer x" },
      nested: { apiKey: "k", api_key: "k", token: "t", password: "p", fine: 1 },
      url: "https://user:hunter2@example.com/x",
      long: "y".repeat(600),
      none: null,
    }) as Record<string, any>;
    expect(out).toMatchObject({ name: "n", secret: "[redacted]", headers: "[redacted]", none: null });
    expect(out.nested).toEqual({ apiKey: "[redacted]", api_key: "[redacted]", token: "[redacted]", password: "[redacted]", fine: 1 });
    expect(out.url).not.toContain("hunter2");
    expect(out.long.length).toBeLessThanOrEqual(501);
  });
});
