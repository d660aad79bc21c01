"""A CloudEvents sink that reads every delivery with the CloudEvents SDK for
Python (`cloudevents.core.bindings.http.from_http_event`), in binary or
structured mode as the request's headers say; the SDK percent-decodes
binary-mode header values (the HTTP binding, 3.1.3.2) and checks the
attributes of the event's specversion. An event the SDK accepts, and whose `specversion` is
1.0, is answered 202 and printed as one JSON line: its attributes, its data
and the mode it came in; anything else is answered 400 and printed as
`{"refused": "<the SDK's error>"}`. The first line says which port it
listens on.

Usage: cloudevents_receiver.py  (listens on a free loopback port)
"""

import json
from http.server import BaseHTTPRequestHandler, HTTPServer

from cloudevents.core.bindings.http import HTTPMessage, from_http_event


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        structured = not any(name.startswith("ce-") for name in headers)
        try:
            event = from_http_event(HTTPMessage(headers=headers, body=body))
            if event.get_specversion() != "1.0":
                raise ValueError(f"specversion {event.get_specversion()!r}")
        except Exception as error:  # the SDK's errors have no common base
            self.answer(400, {"refused": f"{type(error).__name__}: {error}"})
            return
        attributes = event.get_attributes()
        self.answer(202, {
            "mode": "structured" if structured else "binary",
            "attributes": {k: v if isinstance(v, (int, str)) else v.isoformat() if hasattr(v, "isoformat") else str(v) for k, v in attributes.items()},
            "data": event.get_data(),
        })

    def answer(self, status, line):
        print(json.dumps(line), flush=True)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Sink)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
