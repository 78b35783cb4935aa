import { queryTerms, terms } from "./tokenize.js";
import { queryHints } from "./hints.js";

/** One tool as the router sees it: where it runs and what it says about itself. */
export interface RoutableTool {
  /** `builtin`, an upstream MCP server's name, or `vm:<vmId>`. */
  server: string;
  /** The catalog name (what `/mcp/tools/execute` and plans call). */
  name: string;
  /** The tool's own name on its server (the catalog name without its namespace). */
  localName: string;
  description: string;
  category: string;
  inputSchema: Record<string, unknown>;
}

export interface Ranked {
  tool: RoutableTool;
  score: number;
  /** The query terms this tool matched, best first. */
  matched: string[];
}

/**
 * How much one occurrence counts in each field. A word in the tool's name says more about
 * what it does than one in a long description.
 */
export const FIELD_WEIGHTS = { name: 3, category: 2, property: 1.5, description: 1, propertyDescription: 0.75 } as const;

/** BM25 parameters (Robertson & Zaragoza's usual values). */
const K1 = 1.2;
const B = 0.75;

interface Doc {
  tool: RoutableTool;
  tf: Map<string, number>;
  length: number;
}

export interface ToolIndex {
  readonly docs: readonly Doc[];
  readonly df: ReadonlyMap<string, number>;
  readonly avgLength: number;
}

function schemaProperties(schema: Record<string, unknown>): { name: string; description: string }[] {
  const properties = schema.properties;
  if (typeof properties !== "object" || properties === null) return [];
  return Object.entries(properties as Record<string, unknown>).map(([name, value]) => ({
    name,
    description:
      typeof value === "object" && value !== null && typeof (value as { description?: unknown }).description === "string"
        ? (value as { description: string }).description
        : "",
  }));
}

function addField(tf: Map<string, number>, text: string, weight: number): number {
  let added = 0;
  for (const term of terms(text)) {
    tf.set(term, (tf.get(term) ?? 0) + weight);
    added += weight;
  }
  return added;
}

/**
 * A BM25 index over the tools: each tool is one document whose fields (name split on
 * snake/camel case, category, description, JSON-Schema property names and descriptions)
 * are weighted per FIELD_WEIGHTS — BM25F with one shared length normalisation.
 */
export function buildIndex(tools: readonly RoutableTool[]): ToolIndex {
  const df = new Map<string, number>();
  const docs = tools.map((tool): Doc => {
    const tf = new Map<string, number>();
    let length = 0;
    length += addField(tf, tool.localName, FIELD_WEIGHTS.name);
    length += addField(tf, tool.category, FIELD_WEIGHTS.category);
    length += addField(tf, tool.description, FIELD_WEIGHTS.description);
    for (const property of schemaProperties(tool.inputSchema)) {
      length += addField(tf, property.name, FIELD_WEIGHTS.property);
      length += addField(tf, property.description, FIELD_WEIGHTS.propertyDescription);
    }
    for (const term of tf.keys()) df.set(term, (df.get(term) ?? 0) + 1);
    return { tool, tf, length };
  });
  const avgLength = docs.length ? docs.reduce((sum, doc) => sum + doc.length, 0) / docs.length : 0;
  return { docs, df, avgLength };
}

/** BM25's idf, the "plus one" variant that never goes negative for very common terms. */
function idf(index: ToolIndex, term: string): number {
  const n = index.docs.length;
  const df = index.df.get(term) ?? 0;
  return Math.log(1 + (n - df + 0.5) / (df + 0.5));
}

export interface RankOptions {
  /** Only tools this accepts take part (visibility: another tenant's VM tools never rank). */
  filter?: (tool: RoutableTool) => boolean;
  /** Longest list returned (default all matches). */
  limit?: number;
}

/**
 * Every tool with a score above 0 for `query`, best first; ties broken by name so the order
 * is stable. A pure function of the index and the query.
 */
export function rank(index: ToolIndex, query: string, options: RankOptions = {}): Ranked[] {
  const qTerms = queryTerms(`${query} ${queryHints(query)}`);
  if (qTerms.length === 0 || index.docs.length === 0) return [];
  const weights = new Map(qTerms.map((term) => [term, idf(index, term)]));
  const ranked: Ranked[] = [];
  for (const doc of index.docs) {
    if (options.filter && !options.filter(doc.tool)) continue;
    let score = 0;
    const contributions: [string, number][] = [];
    const norm = K1 * (1 - B + (B * doc.length) / (index.avgLength || 1));
    for (const [term, weight] of weights) {
      const tf = doc.tf.get(term);
      if (!tf) continue;
      const part = (weight * (tf * (K1 + 1))) / (tf + norm);
      score += part;
      contributions.push([term, part]);
    }
    if (score > 0) {
      contributions.sort((a, b) => b[1] - a[1]);
      ranked.push({ tool: doc.tool, score: Math.round(score * 10_000) / 10_000, matched: contributions.map(([term]) => term) });
    }
  }
  ranked.sort((a, b) => b.score - a.score || a.tool.name.localeCompare(b.tool.name));
  return options.limit === undefined ? ranked : ranked.slice(0, options.limit);
}
