import { ConfigError } from "../rpc/config.js";
import { maskUrlPasswords } from "../storage/mask.js";

type Env = Record<string, unknown>;

/**
 * `NAME=value` of a Redis setting for a start error. PEM text and passwords are never shown (the
 * name alone); a TLS setting given as a file is shown as `NAME_FILE=path`.
 */
function redisSetting(env: Env, name: string): string {
  if (name === "REDIS_URL") return `REDIS_URL=${String(env.REDIS_URL ?? "redis://127.0.0.1:6379")}`;
  const value = env[name];
  const file = env[`${name}_FILE`];
  if ((value === undefined || value === "") && file) return `${name}_FILE=${String(file)}`;
  if (value === undefined || value === "" || /_(CA|CERT|KEY)$|PASSWORD/.test(name)) return name;
  return `${name}=${String(value)}`;
}

/**
 * The one line a failed start prints (then exit code 1): which variable is wrong and how to
 * fix it, never a stack trace. Errors nobody anticipated still get one line.
 */
export function startupFailure(error: unknown, env: Env): string {
  // One line, and no URL's password (REDIS_URL's included) in it.
  const line = (text: string) => maskUrlPasswords(text.replace(/\s*\n\s*/g, " "));
  if (error instanceof ConfigError) return line(error.message);
  const code = (error as NodeJS.ErrnoException)?.code;
  const message = (error as Error)?.message ?? String(error);
  const host = String(env.HOST ?? "127.0.0.1");
  const port = String(env.PORT ?? "8787");
  switch (code) {
    case "REDIS_SETUP":
      return line(`Invalid configuration: ${redisSetting(env, (error as { variable?: string }).variable ?? "REDIS_URL")}: ${message}`);
    case "REDIS_UNREACHABLE": {
      const setting = env.REDIS_SENTINELS ? "REDIS_SENTINELS" : "REDIS_URL";
      return line(
        `Invalid configuration: ${redisSetting(env, setting)}: ` +
          `Redis did not answer (${message.replace(/^.*did not answer: /, "")}); start Redis there or point ${setting} at a running one`,
      );
    }
    case "WORKERS":
      return line(message);
    case "DATA_DIR_BUSY":
      return line(`Invalid configuration: DATA_DIR=${String(env.DATA_DIR ?? "./data")}: ${message}`);
    case "EADDRINUSE":
      return `Invalid configuration: PORT=${port}: ${host}:${port} is already in use; stop the process holding it or choose another PORT (0 picks a free one)`;
    case "EACCES":
      return `Invalid configuration: PORT=${port}: not allowed to bind ${host}:${port}; choose a PORT above 1023`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EADDRNOTAVAIL":
      return `Invalid configuration: HOST=${host}: cannot bind (${code}); use an address of this machine, e.g. 127.0.0.1 (local only) or 0.0.0.0 (every interface)`;
    default:
      return line(`Start failed: ${message}${code ? ` (${code})` : ""}`);
  }
}
