/**
 * An arithmetic evaluator for the `calculator` tool: a tokenizer and a recursive-descent
 * parser. It never reaches `eval` or `Function`, so an expression can only ever compute a
 * number.
 *
 *   expr    := term (("+" | "-") term)*
 *   term    := unary (("*" | "/" | "%") unary)*
 *   unary   := ("-" | "+") unary | power
 *   power   := primary ("^" unary)?          right-associative; -2^2 = -4, 2^-1 = 0.5
 *   primary := number | constant | name "(" expr ("," expr)* ")" | "(" expr ")"
 */

export class ExpressionError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(`${message} at position ${position + 1}`);
    this.name = "ExpressionError";
  }
}

type Token =
  | { kind: "number"; value: number; at: number }
  | { kind: "name"; value: string; at: number }
  | { kind: "op"; value: string; at: number }
  | { kind: "end"; at: number };

const OPERATORS = new Set(["+", "-", "*", "/", "%", "^", "(", ")", ","]);

export function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < source.length) {
    const ch = source[i]!;
    if (/\s/.test(ch)) {
      i += 1;
      continue;
    }
    const number = /^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(source.slice(i));
    if (number) {
      tokens.push({ kind: "number", value: Number(number[0]), at: i });
      i += number[0].length;
      continue;
    }
    const name = /^[A-Za-z_]\w*/.exec(source.slice(i));
    if (name) {
      tokens.push({ kind: "name", value: name[0].toLowerCase(), at: i });
      i += name[0].length;
      continue;
    }
    if (OPERATORS.has(ch)) {
      tokens.push({ kind: "op", value: ch, at: i });
      i += 1;
      continue;
    }
    throw new ExpressionError(`Unexpected character '${ch}'`, i);
  }
  tokens.push({ kind: "end", at: source.length });
  return tokens;
}

const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E };

const FUNCTIONS: Record<string, { arity: [number, number]; fn: (...args: number[]) => number }> = {
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  abs: { arity: [1, 1], fn: Math.abs },
  round: { arity: [1, 1], fn: Math.round },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  ln: { arity: [1, 1], fn: Math.log },
  log10: { arity: [1, 1], fn: Math.log10 },
  sin: { arity: [1, 1], fn: Math.sin },
  cos: { arity: [1, 1], fn: Math.cos },
  tan: { arity: [1, 1], fn: Math.tan },
  min: { arity: [1, 64], fn: Math.min },
  max: { arity: [1, 64], fn: Math.max },
};

export const FUNCTION_NAMES = Object.keys(FUNCTIONS);

/** Nesting bound, so a hostile expression cannot exhaust the stack. */
const MAX_DEPTH = 200;

class Parser {
  #pos = 0;
  #depth = 0;
  constructor(readonly tokens: Token[]) {}

  get #peek(): Token {
    return this.tokens[this.#pos]!;
  }

  #isOp(value: string): boolean {
    const token = this.#peek;
    return token.kind === "op" && token.value === value;
  }

  #expectOp(value: string): void {
    if (!this.#isOp(value)) throw new ExpressionError(`Expected '${value}'`, this.#peek.at);
    this.#pos += 1;
  }

  parse(): number {
    const value = this.#expr();
    if (this.#peek.kind !== "end") throw new ExpressionError("Unexpected input", this.#peek.at);
    return value;
  }

  #nested<T>(at: number, run: () => T): T {
    if (++this.#depth > MAX_DEPTH) throw new ExpressionError("Expression nested too deeply", at);
    try {
      return run();
    } finally {
      this.#depth -= 1;
    }
  }

  #expr(): number {
    let value = this.#term();
    while (this.#isOp("+") || this.#isOp("-")) {
      const op = (this.tokens[this.#pos++] as { value: string }).value;
      const right = this.#term();
      value = op === "+" ? value + right : value - right;
    }
    return value;
  }

  #term(): number {
    let value = this.#unary();
    while (this.#isOp("*") || this.#isOp("/") || this.#isOp("%")) {
      const token = this.tokens[this.#pos++] as { value: string; at: number };
      const right = this.#unary();
      if ((token.value === "/" || token.value === "%") && right === 0) throw new ExpressionError("Division by zero", token.at);
      value = token.value === "*" ? value * right : token.value === "/" ? value / right : value % right;
    }
    return value;
  }

  #unary(): number {
    const token = this.#peek;
    if (this.#isOp("-") || this.#isOp("+")) {
      this.#pos += 1;
      const operand = this.#nested(token.at, () => this.#unary());
      return token.kind === "op" && token.value === "-" ? -operand : operand;
    }
    return this.#power();
  }

  #power(): number {
    const base = this.#primary();
    if (!this.#isOp("^")) return base;
    const at = this.#peek.at;
    this.#pos += 1;
    return base ** this.#nested(at, () => this.#unary());
  }

  #primary(): number {
    const token = this.#peek;
    if (token.kind === "number") {
      this.#pos += 1;
      return token.value;
    }
    if (token.kind === "op" && token.value === "(") {
      this.#pos += 1;
      const value = this.#nested(token.at, () => this.#expr());
      this.#expectOp(")");
      return value;
    }
    if (token.kind === "name") {
      this.#pos += 1;
      if (!this.#isOp("(")) {
        if (token.value in CONSTANTS) return CONSTANTS[token.value]!;
        throw new ExpressionError(`Unknown name '${token.value}'`, token.at);
      }
      const fn = Object.hasOwn(FUNCTIONS, token.value) ? FUNCTIONS[token.value] : undefined;
      if (!fn) throw new ExpressionError(`Unknown function '${token.value}'`, token.at);
      this.#pos += 1;
      const args = [this.#nested(token.at, () => this.#expr())];
      while (this.#isOp(",")) {
        this.#pos += 1;
        args.push(this.#nested(token.at, () => this.#expr()));
      }
      this.#expectOp(")");
      const [min, max] = fn.arity;
      if (args.length < min || args.length > max) {
        throw new ExpressionError(
          `${token.value}() takes ${min === max ? min : `${min} to ${max}`} argument${max === 1 ? "" : "s"}`,
          token.at,
        );
      }
      return fn.fn(...args);
    }
    if (token.kind === "end") throw new ExpressionError("Unexpected end of expression", token.at);
    throw new ExpressionError(`Unexpected '${token.value}'`, token.at);
  }
}

/** Evaluates an arithmetic expression; throws ExpressionError with a position on bad input. */
export function evaluate(source: string): number {
  const value = new Parser(tokenize(source)).parse();
  if (!Number.isFinite(value)) throw new ExpressionError("Result is not a finite number", 0);
  return value;
}
