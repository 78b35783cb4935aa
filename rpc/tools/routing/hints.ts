import { extractExpression } from "./args.js";

const URL_RE = /https?:\/\/\S+/i;
const TIMEZONE_RE = /\b[A-Z][a-z]+(?:_[A-Z][a-z]+)*\/[A-Z][A-Za-z_]+\b/;

/**
 * Words for what a request contains rather than what it says: "17 * 23?" names no tool but
 * is arithmetic; a URL asks for something HTTP; `Europe/Paris` is a timezone. Added to the
 * query before ranking, so a tool whose description speaks of these matches.
 */
export function queryHints(query: string): string {
  const hints: string[] = [];
  if (extractExpression(query)) hints.push("arithmetic expression");
  if (URL_RE.test(query)) hints.push("url http");
  if (TIMEZONE_RE.test(query)) hints.push("timezone");
  return hints.join(" ");
}
