import { describe, expect, it } from "vitest";
import { replaceStringField, wireTextOf, withWireText } from "../../rpc/wire-text.js";

describe("wire text", () => {
  it("rewrites the top-level field on the text, giving the same JSON as rewriting the object", () => {
    const chunk = { id: "c1", object: "chat.completion.chunk", model: "upstream-1", choices: [{ index: 0, delta: { content: "hi" } }] };
    const text = replaceStringField(JSON.stringify(chunk), "model", "upstream-1", "my-model");
    expect(text).toBeDefined();
    expect(JSON.parse(text!)).toEqual({ ...chunk, model: "my-model" });
  });

  it("keeps the text when the value does not change, and escapes the new value", () => {
    const raw = JSON.stringify({ model: "m" });
    expect(replaceStringField(raw, "model", "m", "m")).toBe(raw);
    expect(JSON.parse(replaceStringField(raw, "model", "m", 'a"b\\c')!)).toEqual({ model: 'a"b\\c' });
  });

  it("refuses when the field cannot be told apart on the text", () => {
    // A nested field of the same name, a string value equal to the name, spacing, a value written otherwise.
    expect(replaceStringField('{"model":"m","x":{"model":"m"}}', "model", "m", "n")).toBeUndefined();
    expect(replaceStringField('{"model":"m","kind":"model"}', "model", "m", "n")).toBeUndefined();
    expect(replaceStringField('{"model": "m"}', "model", "m", "n")).toBeUndefined();
    expect(replaceStringField('{"model":"\\u006d"}', "model", "m", "n")).toBeUndefined();
    expect(replaceStringField('{"id":"m"}', "model", "m", "n")).toBeUndefined();
  });

  it("a content string holding the field's text is not taken for the field", () => {
    const chunk = { model: "m", choices: [{ delta: { content: '{"model":"m"}' } }] };
    const text = replaceStringField(JSON.stringify(chunk), "model", "m", "n");
    expect(JSON.parse(text!)).toEqual({ ...chunk, model: "n" });
  });

  it("remembers an object's text, and only that object's", () => {
    const item = withWireText({ a: 1 }, '{"a":1}');
    expect(wireTextOf(item)).toBe('{"a":1}');
    expect(wireTextOf({ ...item })).toBeUndefined();
    expect(wireTextOf("text")).toBeUndefined();
    expect(wireTextOf(null)).toBeUndefined();
  });
});
