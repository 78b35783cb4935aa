import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";

/** Marks a sealed value; anything without it is a plaintext value stored before encryption existed. */
const PREFIX = "enc:v1:";
const IV_BYTES = 12;
const TAG_BYTES = 16;
// HKDF context: a change here makes every stored secret unreadable, so it is versioned with the prefix.
const SALT = "chat-agent-tool-gateway/data-encryption";
const INFO = "aes-256-gcm/v1";

/**
 * Encryption of secrets at rest (upstream MCP server headers, credential-like values in tool
 * plans): AES-256-GCM from node:crypto with a fresh 96-bit IV per value, key derived with
 * HKDF-SHA256 from DATA_ENCRYPTION_SECRET. A sealed value is a string
 * `enc:v1:<base64url(iv | tag | ciphertext)>`, so it fits wherever the plaintext string was.
 */
export class SecretBox {
  readonly #key: Buffer;

  constructor(secret: string) {
    if (secret.length < 32) throw new Error("The data encryption secret must be at least 32 characters");
    this.#key = Buffer.from(hkdfSync("sha256", secret, SALT, INFO, 32));
  }

  static isSealed(value: unknown): value is string {
    return typeof value === "string" && value.startsWith(PREFIX);
  }

  seal(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
  }

  /** The plaintext of a sealed value; throws when it was sealed with another key or altered. */
  open(sealed: string): string {
    if (!SecretBox.isSealed(sealed)) throw new Error("Not a sealed value");
    const raw = Buffer.from(sealed.slice(PREFIX.length), "base64url");
    if (raw.length < IV_BYTES + TAG_BYTES) throw new Error("Sealed value is truncated");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, raw.subarray(0, IV_BYTES));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString("utf8");
  }

  /** Opens a sealed value; a plaintext value (stored before encryption) is returned as it is. */
  openOrPlain(value: string): string {
    return SecretBox.isSealed(value) ? this.open(value) : value;
  }

  /** Seals a JSON value (tool plan args may hold a header value that is not a string). */
  sealJson(value: unknown): string {
    return this.seal(JSON.stringify(value));
  }

  openJson(sealed: string): unknown {
    return JSON.parse(this.open(sealed));
  }
}
