"""A receiver for assetscan-operator's webhook channel.

Every delivery is verified with the Standard Webhooks library (PyPI
`standardwebhooks`): the signature covers the `webhook-id`, the
`webhook-timestamp` and the body, and a timestamp more than five minutes
from the receiver's clock is refused, so a captured delivery cannot be
replayed later. A delivery whose `webhook-id` was seen before is a re-send
of the same notification: acknowledged, not acted on twice.

    WEBHOOK_SECRET=whsec_... python3 receiver.py [PORT]

During an upgrade from 0.1.0, whose replicas sign only with
`X-AssetScan-Signature` (hex HMAC-SHA256 of the body, keyed with 0.1.0's
secret as text), give that secret too:

    WEBHOOK_SECRET=whsec_... WEBHOOK_LEGACY_SECRET=... python3 receiver.py

and the receiver accepts either signature until you remove it, once no
replica of 0.1.0 runs and no channel sets `legacySignature` (0.1.0's
signature covers neither an id nor a time, so a captured delivery verifies
for ever: keep that window short). Either variable alone works too; a
delivery carrying both signatures is verified with the Standard Webhooks
one whenever the receiver holds its secret.

It listens on 127.0.0.1 (port 0: any free port) and prints
`listening on PORT`, then one line per delivery: `accepted ID`,
`duplicate ID` or `refused: REASON`.
"""

import hashlib
import hmac
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY_BYTES = 1024 * 1024

STANDARD_SECRET = os.environ.get("WEBHOOK_SECRET")
LEGACY_SECRET = os.environ.get("WEBHOOK_LEGACY_SECRET")
if not STANDARD_SECRET and not LEGACY_SECRET:
    sys.exit("set WEBHOOK_SECRET (whsec_...), WEBHOOK_LEGACY_SECRET (0.1.0's), or both")
webhook = Webhook(STANDARD_SECRET) if STANDARD_SECRET else None
seen_ids = set()
seen_lock = Lock()


def act_on(notification):
    """What the receiver does with a verified notification: here, print it."""
    print(f"high risk on {notification['asset']}: {notification['risk']['reasons']}", flush=True)


def verify(body, headers):
    """The notification and its id, if a signature the receiver holds a
    secret for verifies; WebhookVerificationError otherwise."""
    if webhook and headers.get("webhook-signature"):
        return webhook.verify(body, dict(headers)), headers["webhook-id"]
    if LEGACY_SECRET and headers.get("X-AssetScan-Signature"):
        expected = "sha256=" + hmac.new(LEGACY_SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, headers["X-AssetScan-Signature"]):
            raise WebhookVerificationError("No matching 0.1.0 signature")
        # The ticket id, under 0.1.0's signature (its Idempotency-Key
        # header is not): the id the Standard Webhooks headers carry too.
        notification = json.loads(body)
        return notification, notification["ticket_id"]
    raise WebhookVerificationError("Missing required headers")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if length > MAX_BODY_BYTES:
            return self.answer(413, {"error": "body too large"})
        body = self.rfile.read(length)
        try:
            notification, message_id = verify(body, self.headers)
        except WebhookVerificationError as error:
            print(f"refused: {error}", flush=True)
            return self.answer(401, {"error": str(error)})
        with seen_lock:
            duplicate = message_id in seen_ids
            seen_ids.add(message_id)
        print(f"{'duplicate' if duplicate else 'accepted'} {message_id}", flush=True)
        if not duplicate:
            act_on(notification)
        self.answer(200, {"accepted": True, "duplicate": duplicate})

    def answer(self, status, document):
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()
