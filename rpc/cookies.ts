/** How a cookie is set (the HTTP transport serializes it: facade/transport/cookies.ts). */
export interface CookieOptions {
  path: string;
  /** Seconds; 0 clears the cookie. */
  maxAge: number;
  httpOnly: boolean;
  sameSite: "lax" | "strict" | "none";
  secure: boolean;
}

/** Sets a cookie on the answer: given to a call by an HTTP transport (REST, `/rpc`), absent elsewhere. */
export type SetCookie = (name: string, value: string, options: CookieOptions) => void;
