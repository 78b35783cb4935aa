import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { echoVector } from "../../../rpc/chat/embeddings/echo.js";
import { encoded, fromBase64, normalized, toBase64 } from "../../../rpc/chat/embeddings/vectors.js";

/** The vector encodings of docs/embeddings.md "The answer", for all vectors, and the echo model's vectors. */

const floats = fc.array(fc.float({ noNaN: true, noDefaultInfinity: true }), { maxLength: 64 });

describe("vector encodings", () => {
  it("base64 is little-endian float32: it decodes to the float32 value of every number, as the openai client reads it", () => {
    fc.assert(
      fc.property(floats, (vector) => {
        const text = toBase64(vector);
        expect(fromBase64(text)).toEqual(vector.map(Math.fround));
        const bytes = Buffer.from(text, "base64");
        expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4))).toEqual(vector.map(Math.fround));
      }),
    );
    expect(toBase64([1])).toBe(Buffer.from([0, 0, 0x80, 0x3f]).toString("base64"));
  });

  it("gives the client's format whichever the provider sent, and nothing for what is not a vector", () => {
    expect(encoded([0.5, -2], "float")).toEqual([0.5, -2]);
    expect(encoded([0.5, -2], "base64")).toBe(toBase64([0.5, -2]));
    expect(encoded(toBase64([0.5, -2]), "float")).toEqual([0.5, -2]);
    expect(encoded("AAAA", "base64")).toBe("AAAA");
    expect(encoded("AAA", "float")).toBeUndefined();
    expect(encoded([1, "2"], "float")).toBeUndefined();
    expect(encoded(undefined, "float")).toBeUndefined();
  });

  it("normalises to length 1 and leaves a zero vector alone", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -1000, max: 1000 }), { minLength: 1, maxLength: 32 }), (vector) => {
        const unit = normalized(vector);
        if (vector.every((value) => value === 0)) expect(unit).toEqual(vector);
        else expect(Math.hypot(...unit)).toBeCloseTo(1, 12);
      }),
    );
  });
});

describe("the echo model's vectors", () => {
  it("are unit vectors of the asked size, the same for the same features, whatever they are", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ minLength: 1 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 64 }),
        (features, dimensions) => {
          const vector = echoVector(features, dimensions);
          expect(vector).toHaveLength(dimensions);
          expect(Math.hypot(...vector)).toBeCloseTo(1, 12);
          expect(echoVector([...features], dimensions)).toEqual(vector);
        },
      ),
    );
  });
});
