/**
 * Text → index terms for the tool ranker. Identifiers are split the way tools are named
 * (`current_time`, `fetchUrl`, `vm__box__grep`, `text-stats`), everything is lower-cased,
 * common English words are dropped and a light suffix stemmer folds plurals and verb forms
 * ("fetches", "fetching", "fetched" → "fetch") so a request and a description meet.
 */

const STOPWORDS = new Set(
  (
    "a an and any are as at be but by can could do does for from get give has have how i if in into is it its " +
    "me my of on or our please show so some than that the their them then there these this those to tell us " +
    "use using via want was we what when where which who will with would you your"
  ).split(" "),
);

/**
 * A few words people use for what tool descriptions say differently. Applied to queries only
 * (after stemming), so a description is indexed as written.
 */
const SYNONYM_WORDS: Record<string, string[]> = {
  calculate: ["evaluate", "arithmetic", "expression"],
  compute: ["evaluate", "arithmetic", "expression"],
  math: ["arithmetic", "expression"],
  sum: ["arithmetic"],
  multiply: ["arithmetic"],
  plus: ["arithmetic"],
  minus: ["arithmetic"],
  download: ["fetch", "http"],
  web: ["http", "url"],
  website: ["http", "url"],
  page: ["url", "http"],
  clock: ["time"],
  date: ["time"],
  now: ["current", "time"],
  today: ["current", "date"],
  search: ["find", "grep"],
  find: ["search", "grep"],
  file: ["path"],
  run: ["execute"],
  execute: ["run"],
};

/** Splits identifiers and prose into lower-case words (letters and digits). */
export function words(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2") // camelCase → camel Case
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2") // HTTPServer → HTTP Server
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/** A deliberately small suffix stemmer: enough to fold plurals and -ing/-ed/-ion forms. */
export function stem(word: string): string {
  if (word.length <= 3 || /^\d+$/.test(word)) return word;
  let w = word;
  if (w.endsWith("ies") && w.length > 4) w = `${w.slice(0, -3)}y`;
  else if (/(ss|us)$/.test(w)) {
    // class, status: not plurals
  } else if (/(sses|xes|ches|shes|zes)$/.test(w)) w = w.slice(0, -2);
  else if (w.endsWith("s")) w = w.slice(0, -1);
  if (w.endsWith("ing") && w.length > 5) w = w.slice(0, -3);
  else if (w.endsWith("ed") && w.length > 4) w = w.slice(0, -2);
  else if (w.endsWith("ion") && w.length > 6) w = w.slice(0, -3);
  else if (w.endsWith("er") && w.length > 5) w = w.slice(0, -2);
  if (w.endsWith("e") && w.length > 4) w = w.slice(0, -1);
  return w;
}

// Keys and values go through the same stemmer as the text they meet.
const synonyms = new Map(Object.entries(SYNONYM_WORDS).map(([word, extra]) => [stem(word), extra.map(stem)]));

/** Index terms of a text: split, stop words dropped, stemmed. Repeats are kept (they are term frequency). */
export function terms(text: string): string[] {
  return words(text)
    .filter((word) => !STOPWORDS.has(word) && (word.length > 1 || /\d/.test(word)))
    .map(stem);
}

/** Query terms: `terms` plus the synonyms of each (a synonym counts once, whatever it expands from). */
export function queryTerms(text: string): string[] {
  const base = terms(text);
  const expanded = new Set(base);
  for (const term of base) for (const extra of synonyms.get(term) ?? []) expanded.add(extra);
  return [...expanded];
}
