"""A receiver for assetscan-operator's webhook channel.

Every delivery is verified with the Standard Webhooks library (PyPI
`standardwebhooks`): the signature covers the `webhook-id`, the
`webhook-timestamp` and the body, and a timestamp more than five minutes
from the receiver's clock is refused, so a captured delivery cannot be
replayed later. A delivery whose `webhook-id` was seen before is a re-send
of the same notification: acknowledged, not acted on twice.

    WEBHOOK_SECRET=whsec_... python3 receiver.py [PORT]

It listens on 127.0.0.1 (port 0: any free port) and prints
`listening on PORT`, then one line per delivery: `accepted ID`,
`duplicate ID` or `refused: REASON`.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Lock

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

MAX_BODY_BYTES = 1024 * 1024

webhook = Webhook(os.environ["WEBHOOK_SECRET"])
seen_ids = set()
seen_lock = Lock()


def act_on(notification):
    """What the receiver does with a verified notification: here, print it."""
    print(f"high risk on {notification['asset']}: {notification['risk']['reasons']}", flush=True)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        if length > MAX_BODY_BYTES:
            return self.answer(413, {"error": "body too large"})
        body = self.rfile.read(length)
        try:
            notification = webhook.verify(body, dict(self.headers))
        except WebhookVerificationError as error:
            print(f"refused: {error}", flush=True)
            return self.answer(401, {"error": str(error)})
        message_id = self.headers["webhook-id"]
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
