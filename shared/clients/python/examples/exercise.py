"""The calls a program integrating with Converger makes, against a running stack
(CONVERGER_API_URL, CONVERGER_API_KEY): a webhook channel to a receiver of its own that checks
each request's signature, an activity and a batch, the deliveries listed, a dead letter
retried, the usage read. Prints what it did; exits non-zero on the first surprise."""

import base64
import http.server
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from converger_client import AuthenticatedClient  # noqa: E402
from converger_client.api.activities import create_activities, create_activity  # noqa: E402
from converger_client.api.channels import create_channel  # noqa: E402
from converger_client.api.deliveries import get_delivery, list_deliveries, retry_delivery  # noqa: E402
from converger_client.api.usage import get_usage  # noqa: E402
from converger_client.models import (  # noqa: E402
    CreatedChannel, ErrorBody, NewActivity, NewActivityBatch, NewChannel, NewChannelConfig,
    NewChannelRetryPolicy,
)
from converger_webhooks import verify_webhook  # noqa: E402

api = AuthenticatedClient(base_url=os.environ["CONVERGER_API_URL"],
                          token=os.environ["CONVERGER_API_KEY"], timeout=30.0)
state = {"secret": "", "refusing": True, "verified": 0, "forged": 0,
         "accepted_altered": 0}


def check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"failed: {what}")
    print(f"ok: {what}")


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        wid, ts, sig = (self.headers["webhook-id"], self.headers["webhook-timestamp"],
                        self.headers["webhook-signature"])
        ok = verify_webhook(state["secret"], wid, ts, sig, body)
        state["verified" if ok else "forged"] += 1
        # The same request altered must not verify: a changed body, another id, another
        # secret, or a timestamp past the tolerance.
        other = "whsec_" + base64.b64encode(b"another secret of 24 bytes").decode()
        altered = [
            verify_webhook(state["secret"], wid, ts, sig, body + b" "),
            verify_webhook(state["secret"], wid + "x", ts, sig, body),
            verify_webhook(other, wid, ts, sig, body),
            verify_webhook(state["secret"], wid, ts, sig, body, now_s=int(ts) + 301),
        ]
        if any(altered):
            state["accepted_altered"] += 1
        self.send_response(400 if state["refusing"] and b"refuse" in body else 200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=server.serve_forever, daemon=True).start()
port = server.server_address[1]


def settled(delivery_id: str):
    for _ in range(300):
        d = get_delivery.sync(delivery_id, client=api)
        if isinstance(d, ErrorBody) or d is None:
            raise SystemExit(f"GET delivery: {d}")
        if d.status not in ("pending", "paused"):
            return d
        time.sleep(0.1)
    raise SystemExit(f"delivery {delivery_id} did not settle")


def activity(channel: str, payload: dict) -> NewActivity:
    return NewActivity(conversation_id="py-1", channel_ids=[channel], payload=payload)


try:
    created = create_channel.sync(client=api, body=NewChannel(
        type_="webhook", name="python client",
        config=NewChannelConfig.from_dict({"url": f"http://127.0.0.1:{port}/hook"}),
        retry_policy=NewChannelRetryPolicy.from_dict({"max_attempts": 1})))
    check(isinstance(created, CreatedChannel), "a channel is created with its signing secret")
    state["secret"] = created.signing_secret
    channel = created.id

    one = create_activity.sync(client=api, body=activity(channel, {"text": "hello"}))
    check(settled(one.deliveries[0].id).status == "sent", "an activity is sent")

    batch = create_activities.sync(client=api, body=NewActivityBatch(activities=[
        activity(channel, {"text": "two"}), activity(channel, {"text": "refuse me"})]))
    ids = [r.activity.deliveries[0].id for r in batch.results]
    sent, dead = settled(ids[0]), settled(ids[1])
    check(sent.status == "sent" and dead.status == "failed", "a batch's items go one by one")

    failed = list_deliveries.sync(client=api, status="failed", channel_id=channel)
    check(any(d.id == dead.id for d in failed.data), "the dead letter is listed")

    state["refusing"] = False
    retried = retry_delivery.sync(dead.id, client=api)
    check(retried.status == "pending", "the dead letter is retried")
    again = settled(dead.id)
    check(again.status == "sent" and again.retry_count == 1, "the retry is sent")

    # Usage is counted from the deliveries table's stream: it follows within seconds.
    counted = 0
    for _ in range(300):
        counted = get_usage.sync(client=api).total.deliveries
        if counted >= 3:
            break
        time.sleep(0.1)
    check(counted >= 3, "the usage counts the deliveries")

    refused = create_activity.sync_detailed(client=api, body=NewActivity(
        conversation_id="py-1", channel_ids=[], payload={}))
    check(refused.status_code == 422 and isinstance(refused.parsed, ErrorBody)
          and bool(refused.parsed.error.code), "a refusal has its status and stable code")
    check(state["verified"] >= 4 and state["forged"] == 0, "every webhook's signature verifies")
    check(state["accepted_altered"] == 0, "an altered webhook does not verify")
finally:
    server.shutdown()
