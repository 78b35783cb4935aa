/**
 * Auth of every key-management route: a signed-in user (session token), never a key, so a
 * leaked key cannot mint or revoke others (docs/interface.md 5 "an API key can never create another key").
 * A valid key gets 403 with this message, not a 401 that reads like a bad key.
 */
export const KEYS_NEED_A_SESSION = { kinds: ["session"], keyRefusal: "API keys cannot manage keys; sign in" } as const;

/** The same, also for the console's cookie session (a signed-in browser; docs/console.md). */
export const KEYS_NEED_A_SESSION_OR_CONSOLE = { ...KEYS_NEED_A_SESSION, kinds: ["session", "console"] } as const;
