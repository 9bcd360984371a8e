// Converger's tenant API as typed calls (the paths and bodies of docs/openapi.json, generated
// into schema.d.ts by `npm run generate`), and Standard Webhooks verification for receivers.

import createClient from "openapi-fetch";
import { createHmac, timingSafeEqual } from "node:crypto";
import type { components, paths } from "./schema.js";

export type { components, paths } from "./schema.js";
export type Schemas = components["schemas"];

/** A client of the tenant API at `baseUrl` (no trailing `/api/v1`), calling with `apiKey`. */
export function createConvergerClient(baseUrl: string, apiKey: string) {
  return createClient<paths>({
    baseUrl: baseUrl.replace(/\/+$/, ""),
    headers: { Authorization: `Bearer ${apiKey}` },
  });
}

/** How far a webhook's timestamp may be from now, in seconds. */
export const WEBHOOK_TOLERANCE_S = 5 * 60;

/**
 * Whether a webhook request is Converger's: `webhook-signature` holds a `v1,<base64>` HMAC-SHA256
 * of `<webhook-id>.<webhook-timestamp>.<body>` under the channel's signing secret (`whsec_...`;
 * during a rotation's grace, one signature per secret, separated by spaces), and its timestamp
 * is within `WEBHOOK_TOLERANCE_S` of `nowS`. `body` is the request's body exactly as received.
 */
export function verifyWebhook(
  secret: string,
  headers: { id: string; timestamp: string; signature: string },
  body: string | Uint8Array,
  nowS: number = Math.floor(Date.now() / 1000),
): boolean {
  const ts = Number(headers.timestamp);
  if (!Number.isInteger(ts) || Math.abs(nowS - ts) > WEBHOOK_TOLERANCE_S) {
    return false;
  }
  const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
  const mac = createHmac("sha256", key)
    .update(`${headers.id}.${headers.timestamp}.`)
    .update(body)
    .digest();
  return headers.signature.split(" ").some((part) => {
    const [version, value] = part.split(",", 2);
    if (version !== "v1" || value === undefined) {
      return false;
    }
    const given = Buffer.from(value, "base64");
    return given.length === mac.length && timingSafeEqual(given, mac);
  });
}
