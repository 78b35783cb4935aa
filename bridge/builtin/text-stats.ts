import { okResult, type BuiltinTool } from "./internal/tool.js";

const words = new Intl.Segmenter("en", { granularity: "word" });
const graphemes = new Intl.Segmenter("en", { granularity: "grapheme" });
const sentences = new Intl.Segmenter("en", { granularity: "sentence" });

export const textStats: BuiltinTool = {
  name: "text_stats",
  description: "Counts characters (as a reader sees them), words, sentences and lines of a text, and lists its most frequent words.",
  category: "text",
  inputSchema: {
    type: "object",
    properties: {
      text: { type: "string", maxLength: 500_000, description: "The text to measure." },
      top: { type: "integer", minimum: 0, maximum: 50, default: 5, description: "How many frequent words to list." },
    },
    required: ["text"],
    additionalProperties: false,
  },
  async run(args) {
    const text = args.text as string;
    const top = (args.top as number | undefined) ?? 5;
    const counts = new Map<string, number>();
    let wordCount = 0;
    for (const segment of words.segment(text)) {
      if (!segment.isWordLike) continue;
      wordCount += 1;
      const word = segment.segment.toLowerCase();
      counts.set(word, (counts.get(word) ?? 0) + 1);
    }
    let characters = 0;
    for (const _ of graphemes.segment(text)) characters += 1;
    let sentenceCount = 0;
    for (const segment of sentences.segment(text)) if (segment.segment.trim()) sentenceCount += 1;
    const structured = {
      characters,
      words: wordCount,
      sentences: sentenceCount,
      lines: text === "" ? 0 : text.split(/\r\n|\r|\n/).length,
      bytes: Buffer.byteLength(text, "utf8"),
      top_words: [...counts.entries()]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, top)
        .map(([word, count]) => ({ word, count })),
    };
    return okResult(
      `${structured.words} words, ${structured.characters} characters, ${structured.sentences} sentences, ${structured.lines} lines`,
      structured,
    );
  },
};
