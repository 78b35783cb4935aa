/**
 * Embedding vectors as the OpenAI wire format carries them (docs/embeddings.md "Encoding"): an
 * array of numbers, or with `encoding_format: "base64"` the vector's little-endian float32 bytes
 * in base64 (what the official `openai` client asks for by default and decodes).
 */

/** The vector as base64 of little-endian float32, as OpenAI sends it. */
export function toBase64(vector: readonly number[]): string {
  const bytes = Buffer.allocUnsafe(vector.length * 4);
  for (let i = 0; i < vector.length; i++) bytes.writeFloatLE(vector[i]!, i * 4);
  return bytes.toString("base64");
}

/** A base64 vector back to numbers; undefined when it is not whole float32s. */
export function fromBase64(text: string): number[] | undefined {
  const bytes = Buffer.from(text, "base64");
  if (bytes.length % 4 !== 0) return undefined;
  const vector = new Array<number>(bytes.length / 4);
  for (let i = 0; i < vector.length; i++) vector[i] = bytes.readFloatLE(i * 4);
  return vector;
}

/** The vector scaled to length 1 (a zero vector is left as it is). */
export function normalized(vector: number[]): number[] {
  let sum = 0;
  for (const value of vector) sum += value * value;
  if (sum === 0) return vector;
  const norm = Math.sqrt(sum);
  return vector.map((value) => value / norm);
}

/** A vector in the format the client asked for, whichever the provider sent; undefined when unreadable. */
export function encoded(vector: unknown, format: "float" | "base64"): number[] | string | undefined {
  if (typeof vector === "string") return format === "base64" ? vector : fromBase64(vector);
  if (!Array.isArray(vector) || !vector.every((value) => typeof value === "number")) return undefined;
  return format === "base64" ? toBase64(vector) : vector;
}
