"""Standard Webhooks verification for receivers of Converger's webhooks.

A request is Converger's when ``webhook-signature`` holds a ``v1,<base64>`` HMAC-SHA256 of
``<webhook-id>.<webhook-timestamp>.<body>`` under the channel's signing secret (``whsec_...``;
during a rotation's grace, one signature per secret, separated by spaces) and its timestamp is
within ``TOLERANCE_S`` of now. ``body`` is the request's body exactly as received.
"""

import base64
import hashlib
import hmac
import time

TOLERANCE_S = 5 * 60


def verify_webhook(secret: str, webhook_id: str, timestamp: str, signature: str,
                   body: bytes, now_s: int | None = None) -> bool:
    now_s = int(time.time()) if now_s is None else now_s
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    if abs(now_s - ts) > TOLERANCE_S:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    mac = hmac.new(key, f"{webhook_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    for part in signature.split(" "):
        version, _, value = part.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(value, validate=True)
        except ValueError:
            continue
        if hmac.compare_digest(given, mac):
            return True
    return False
