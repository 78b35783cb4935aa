/** The few characters that matter in HTML text. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);
}

/** Headers of the authorization server's own HTML answers: nothing loads, nothing frames them, no Referer leaves. */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "cache-control": "no-store",
};

/**
 * A plain page for an authorization that cannot go on (an expired request, a link opened in
 * another browser): no scripts, no external fonts, the message escaped.
 */
export function errorPage(title: string, message: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:4rem auto;padding:0 1rem;color:#1f2328}h1{font-size:1.4rem}</style>
</head><body><main><h1>${escapeHtml(title)}</h1><p role="alert">${escapeHtml(message)}</p>
<p>Start again from the application that sent you here.</p></main></body></html>
`;
}
