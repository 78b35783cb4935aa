import { ExpressionError, FUNCTION_NAMES, evaluate } from "../../rpc/tools/expression.js";
import { errorResult, okResult, type BuiltinTool } from "./internal/tool.js";

export const calculator: BuiltinTool = {
  name: "calculator",
  description:
    `Evaluates an arithmetic expression exactly as written: + - * / % ^ (power), parentheses, unary minus, ` +
    `the constants pi and e, and the functions ${FUNCTION_NAMES.join(", ")}. Example: "2 * (3 + 4) ^ 2 / sqrt(16)".`,
  category: "math",
  inputSchema: {
    type: "object",
    properties: {
      expression: { type: "string", minLength: 1, maxLength: 2000, description: "The expression to evaluate." },
    },
    required: ["expression"],
    additionalProperties: false,
  },
  async run(args) {
    const expression = args.expression as string;
    try {
      const result = evaluate(expression);
      return okResult(String(result), { expression, result });
    } catch (error) {
      if (error instanceof ExpressionError) return errorResult(`Cannot evaluate: ${error.message}`);
      throw error;
    }
  },
};
