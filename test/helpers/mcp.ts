import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import type { Catalog } from "../../bridge/catalog.js";
import { eventually } from "./eventually.js";

/**
 * Counts `notifications/tools/list_changed` on `client`, once the bridge holds the client's
 * GET stream (the SDK opens it after initialize): until then a change would go unseen.
 * `count()` is the number received so far.
 */
export async function watchListChanged(client: Client, catalog: Catalog): Promise<{ count(): number }> {
  let changes = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    changes += 1;
  });
  await eventually(async () => {
    const before = changes;
    catalog.changed();
    await new Promise((resolve) => setTimeout(resolve, 60));
    return changes > before;
  });
  return { count: () => changes };
}
