import { errorResult, okResult, type BuiltinTool } from "./internal/tool.js";

function parts(date: Date, timeZone: string): Record<string, string> {
  const format = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    weekday: "long",
    timeZoneName: "longOffset",
  });
  return Object.fromEntries(format.formatToParts(date).map((part) => [part.type, part.value]));
}

export const currentTime: BuiltinTool = {
  name: "current_time",
  description:
    "The current date and time in an IANA timezone (e.g. Europe/Paris, America/New_York; default UTC), with its UTC offset and weekday.",
  category: "time",
  inputSchema: {
    type: "object",
    properties: {
      timezone: { type: "string", minLength: 1, maxLength: 64, description: "IANA timezone name; default UTC." },
    },
    additionalProperties: false,
  },
  async run(args) {
    const timezone = (args.timezone as string | undefined) ?? "UTC";
    const now = new Date();
    let p: Record<string, string>;
    try {
      p = parts(now, timezone);
    } catch (error) {
      if (error instanceof RangeError) return errorResult(`Unknown timezone: ${timezone} (use an IANA name such as Europe/Paris)`);
      throw error;
    }
    // "GMT" alone means +00:00; otherwise "GMT+05:30".
    const offset = p.timeZoneName === "GMT" ? "+00:00" : p.timeZoneName!.replace("GMT", "");
    const local = `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}:${p.second}${offset}`;
    const structured = {
      timezone: new Intl.DateTimeFormat("en-US", { timeZone: timezone }).resolvedOptions().timeZone,
      local,
      utc: now.toISOString(),
      utc_offset: offset,
      weekday: p.weekday!,
      unix_ms: now.getTime(),
    };
    return okResult(`${structured.local} (${structured.timezone}, ${structured.weekday})`, structured);
  },
};
