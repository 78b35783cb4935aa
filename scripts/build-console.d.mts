/** Where the console's source lives (facade/console/page) and where its bundle goes (dist/console). */
export const CONSOLE_SOURCE: string;
export const CONSOLE_OUT: string;
/** Builds the console bundle when missing, older than its sources or `force`; resolves to whether it built. */
export function buildConsole(options?: { force?: boolean }): Promise<boolean>;
