/**
 * Splits a request into the steps it asks for, in order: "fetch X, then count its words;
 * finally tell me the time" → three clauses. Quoted text is never split, so
 * `count the words in "this and then that"` stays one clause.
 */
const SEPARATOR =
  /\s*(?:;|\n+|,?\s*\band then\b|,?\s*\bthen\b|,?\s*\bafter that\b|,?\s*\bafterwards\b|,?\s*\band finally\b|,?\s*\bfinally\b)\s*/i;
const QUOTED = /"[^"]*"|“[^”]*”|`[^`]*`|(?<=^|\s)'[^']*'(?=$|[\s.,;:!?])/g;
const LEADING = /^(?:(?:and|also|first(?:ly)?|next|please|now)\b[\s,:]*)+/i;

export function splitClauses(input: string): string[] {
  const quoted: string[] = [];
  const masked = input.replace(QUOTED, (match) => {
    quoted.push(match);
    return `\u0000${quoted.length - 1}\u0000`;
  });
  return masked
    .split(SEPARATOR)
    .map((part) => part.replace(/\u0000(\d+)\u0000/g, (_, i: string) => quoted[Number(i)]!))
    .map((part) => part.replace(LEADING, "").replace(/^[\s,.]+|[\s,]+$/g, ""))
    .filter((part) => /[\p{L}\p{N}]/u.test(part));
}
