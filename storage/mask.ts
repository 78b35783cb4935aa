/**
 * A URL's password as it may be written out (a log line, a start error): `redis://:secret@host`
 * becomes `redis://:***@host`. Anything that prints a URL from the configuration (REDIS_URL, a
 * provider's base URL) goes through this, or through the logger, which applies it to every line
 * (rpc/log.ts).
 */
// The password runs to the last `@` of the URL, so one holding `/` or `@` (not a valid URL, so
// exactly the one a start-up error prints) is masked whole.
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/@:"']*:)[^\s"']*@/gi;

export function maskUrlPasswords(text: string): string {
  if (!text.includes("://") || !text.includes("@")) return text;
  return text.replace(URL_PASSWORD, "$1***@");
}
