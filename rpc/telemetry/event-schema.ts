import semver from "semver";
import * as v from "valibot";

/** How far ahead of the server's clock an event may be stamped (client clock skew). */
export const MAX_FUTURE_MS = 5 * 60_000;
export const MAX_ATTRIBUTES = 32;
export const MAX_ATTRIBUTE_STRING = 1_024;
export const MAX_ATTRIBUTES_BYTES = 8_192;

const AttributeKey = /^[A-Za-z_][A-Za-z0-9_.]{0,63}$/;

/** One event of a batch (docs/telemetry.md); checked one by one, so a bad event never sinks the batch. */
export const EventSchema = v.object({
  name: v.pipe(
    v.string("name must be a string"),
    v.maxLength(128, "name: at most 128 characters"),
    v.regex(/^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/, "name must be dotted lowercase, e.g. app.start or sync.upload_failed"),
  ),
  timestamp: v.union(
    [v.pipe(v.string(), v.isoTimestamp()), v.pipe(v.number(), v.integer(), v.minValue(0))],
    "timestamp must be an ISO 8601 date-time or epoch milliseconds",
  ),
  component: v.pipe(
    v.string("component must be a string"),
    v.regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "component: lowercase letters, digits, . _ - (1-64 characters)"),
  ),
  version: v.pipe(
    v.string("version must be a string"),
    v.maxLength(256),
    v.check((value) => semver.valid(value) !== null && /^\d/.test(value), "version must be a SemVer version such as 1.4.2"),
  ),
  clientId: v.pipe(v.string("clientId must be a string"), v.regex(/^[\w.:@-]{1,128}$/, "clientId: 1-128 letters, digits or _ . : @ -")),
  attributes: v.optional(
    v.pipe(
      v.record(
        v.pipe(v.string(), v.regex(AttributeKey, "attribute names: a letter or _, then letters, digits, _ or . (max 64)")),
        v.union(
          [
            v.pipe(v.string(), v.maxLength(MAX_ATTRIBUTE_STRING, `attribute strings: at most ${MAX_ATTRIBUTE_STRING} characters`)),
            v.pipe(v.number(), v.finite()),
            v.boolean(),
            v.null(),
          ],
          "attribute values must be strings, finite numbers, booleans or null",
        ),
        "attributes must be an object",
      ),
      v.check((attributes) => Object.keys(attributes).length <= MAX_ATTRIBUTES, `attributes: at most ${MAX_ATTRIBUTES} keys`),
      v.check(
        (attributes) => Buffer.byteLength(JSON.stringify(attributes)) <= MAX_ATTRIBUTES_BYTES,
        `attributes: at most ${MAX_ATTRIBUTES_BYTES} bytes as JSON`,
      ),
    ),
    {},
  ),
});
