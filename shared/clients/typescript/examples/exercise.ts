// The calls a program integrating with Converger makes, against a running stack
// (CONVERGER_API_URL, CONVERGER_API_KEY): a webhook channel to a receiver of its own that
// checks each request's signature, an activity and a batch, the deliveries listed, a dead
// letter retried, the usage read. Prints what it did; exits non-zero on the first surprise.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { createConvergerClient, verifyWebhook } from "../src/index.js";

const url = process.env.CONVERGER_API_URL;
const key = process.env.CONVERGER_API_KEY;
if (!url || !key) {
  throw new Error("set CONVERGER_API_URL and CONVERGER_API_KEY");
}
const api = createConvergerClient(url, key);

function check(ok: boolean, what: string): void {
  if (!ok) {
    throw new Error(what);
  }
  console.log(`ok: ${what}`);
}

// The receiver: refuses a payload marked "refuse" while `refusing`, checks every signature.
let secret = "";
let refusing = true;
let verified = 0;
let forged = 0;
let acceptedAltered = 0;
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const headers = {
      id: String(req.headers["webhook-id"]),
      timestamp: String(req.headers["webhook-timestamp"]),
      signature: String(req.headers["webhook-signature"]),
    };
    if (verifyWebhook(secret, headers, body)) verified += 1;
    else forged += 1;
    // The same request altered must not verify: a changed body, another id, another
    // secret, or a timestamp past the tolerance.
    const otherSecret = `whsec_${Buffer.from("another secret of 24 bytes").toString("base64")}`;
    const altered = [
      verifyWebhook(secret, headers, Buffer.concat([body, Buffer.from(" ")])),
      verifyWebhook(secret, { ...headers, id: `${headers.id}x` }, body),
      verifyWebhook(otherSecret, headers, body),
      verifyWebhook(secret, headers, body, Number(headers.timestamp) + 301),
    ];
    if (altered.some((ok) => ok)) acceptedAltered += 1;
    res.statusCode = refusing && body.toString().includes("refuse") ? 400 : 200;
    res.end();
  });
});
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const port = (server.address() as AddressInfo).port;

async function settled(id: string) {
  for (let i = 0; i < 300; i++) {
    const { data, error } = await api.GET("/api/v1/deliveries/{id}", {
      params: { path: { id } },
    });
    if (error) throw new Error(`GET delivery: ${JSON.stringify(error)}`);
    if (data.status !== "pending" && data.status !== "paused") return data;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`delivery ${id} did not settle`);
}

try {
  const created = await api.POST("/api/v1/channels", {
    body: {
      type: "webhook",
      name: "typescript client",
      config: { url: `http://127.0.0.1:${port}/hook` },
      retry_policy: { max_attempts: 1 },
    },
  });
  if (!created.data) throw new Error(`create channel: ${JSON.stringify(created.error)}`);
  secret = created.data.signing_secret;
  const channel = created.data.id;
  check(secret.startsWith("whsec_"), "a channel is created with its signing secret");

  const one = await api.POST("/api/v1/activities", {
    body: { conversation_id: "ts-1", channel_ids: [channel], payload: { text: "hello" } },
  });
  if (!one.data) throw new Error(`post activity: ${JSON.stringify(one.error)}`);
  const first = await settled(one.data.deliveries[0].id);
  check(first.status === "sent", "an activity is sent");

  const batch = await api.POST("/api/v1/activities/batch", {
    body: {
      activities: [
        { conversation_id: "ts-1", channel_ids: [channel], payload: { text: "two" } },
        { conversation_id: "ts-1", channel_ids: [channel], payload: { text: "refuse me" } },
      ],
    },
  });
  if (!batch.data) throw new Error(`post batch: ${JSON.stringify(batch.error)}`);
  const ids = batch.data.results.map((r) => {
    if (!("activity" in r) || !r.activity) throw new Error(`batch item: ${JSON.stringify(r)}`);
    return r.activity.deliveries[0].id;
  });
  const [sent, dead] = [await settled(ids[0]), await settled(ids[1])];
  check(sent.status === "sent" && dead.status === "failed", "a batch's items go one by one");

  const failed = await api.GET("/api/v1/deliveries", {
    params: { query: { status: "failed", channel_id: channel } },
  });
  check(
    failed.data?.data.some((d) => d.id === dead.id) === true,
    "the dead letter is listed",
  );

  refusing = false;
  const retried = await api.POST("/api/v1/deliveries/{id}/retry", {
    params: { path: { id: dead.id } },
  });
  check(retried.data?.status === "pending", "the dead letter is retried");
  const again = await settled(dead.id);
  check(again.status === "sent" && again.retry_count === 1, "the retry is sent");

  // Usage is counted from the deliveries table's stream: it follows within seconds.
  let counted = 0;
  for (let i = 0; i < 300 && counted < 3; i++) {
    const usage = await api.GET("/api/v1/usage", {});
    counted = usage.data?.total.deliveries ?? 0;
    if (counted < 3) await new Promise((r) => setTimeout(r, 100));
  }
  check(counted >= 3, "the usage counts the deliveries");

  const refused = await api.POST("/api/v1/activities", {
    body: { conversation_id: "ts-1", channel_ids: [], payload: {} },
  });
  check(
    refused.response.status === 422 && typeof refused.error?.error.code === "string",
    "a refusal has its status and stable code",
  );
  check(verified >= 4 && forged === 0, "every webhook's signature verifies");
  check(acceptedAltered === 0, "an altered webhook does not verify");
} finally {
  server.close();
}
