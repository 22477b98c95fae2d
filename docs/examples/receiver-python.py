#!/usr/bin/env python3
"""A minimal asset-webhooks receiver in Python, with the standard library only.

It verifies the Standard Webhooks signature, ignores a payload it has received
before (same webhook-id), deduplicates events by eventId, keeps per asset only
an event newer than the one it holds, and answers 2xx only once the events are
stored.

    WEBHOOK_SECRET='whsec_...' PORT=8080 python3 receiver-python.py

The in-memory sets and dict stand in for your database: keep them in durable
storage and update them in the same transaction as the change they record.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

SECRET = os.environ.get("WEBHOOK_SECRET", "")
if not SECRET.startswith("whsec_"):
    sys.exit("WEBHOOK_SECRET: expected the signing secret, 'whsec_' and base64")
# The HMAC key is the base64-decoded part after 'whsec_', not the string itself.
KEY = base64.b64decode(SECRET[len("whsec_"):])
# A webhook-timestamp further than this from our clock is refused (a replayed request).
TOLERANCE_SECONDS = 5 * 60
# The service sends at most 16 MB per payload; anything larger is not from it.
MAX_BODY_BYTES = 16 * 1024 * 1024

seen_webhook_ids = set()  # webhook-ids of the payloads stored
seen_event_ids = set()
applied_at = {}  # assetUuid -> the eventTimestamp of the latest event applied (removals included)


def verified(headers, body):
    """True when one of the webhook-signature entries signs this exact body."""
    msg_id = headers.get("webhook-id")
    timestamp = headers.get("webhook-timestamp")
    signatures = headers.get("webhook-signature")
    if not (msg_id and timestamp and signatures):
        return False
    try:
        if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
            return False
    except ValueError:
        return False
    signed = f"{msg_id}.{timestamp}.".encode() + body
    expected = base64.b64encode(hmac.new(KEY, signed, hashlib.sha256).digest())
    # One entry per signing key ("v1,<base64>"), space-separated: any one will do.
    for entry in signatures.split(" "):
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode(), expected):
            return True
    return False


def apply(event):
    if event["eventId"] in seen_event_ids:
        return "duplicate"
    seen_event_ids.add(event["eventId"])
    # Apply an event only when its eventTimestamp is greater than the one held:
    # an older or equal one is ignored. ISO-8601 UTC timestamps with
    # milliseconds and Z compare as strings.
    held = applied_at.get(event["assetUuid"])
    if held is not None and event["eventTimestamp"] <= held:
        return "older"
    applied_at[event["assetUuid"]] = event["eventTimestamp"]
    if event["eventType"] in ("PURGED", "UNMATCHED"):
        return "removed"  # delete your copy (UNMATCHED: mirror webhooks only; it may come back with a later EDITED)
    if event["eventType"] == "DELETED":
        return "archived"  # hide it: it may come back with a later EDITED
    return "upserted"  # CREATED, EDITED, REVERSION: fetch or refresh the asset


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            return self.answer(411)  # the service always sends Content-Length
        if not 0 <= length <= MAX_BODY_BYTES:
            return self.answer(413)
        body = self.rfile.read(length)  # the exact bytes: verify before parsing
        if not verified(self.headers, body):
            print("refused: no valid signature", flush=True)
            return self.answer(401)  # a 4xx is final: dead-lettered, not retried
        webhook_id = self.headers["webhook-id"]
        if webhook_id in seen_webhook_ids:
            # Our 2xx did not reach the service, or an operator sent it again: stored already.
            print(f"ignored {webhook_id}: received before", flush=True)
            return self.answer(204)
        # Python's json keeps every digit of assetId and atomId.
        payload = json.loads(body)
        results = [apply(event) for event in payload["events"]]
        seen_webhook_ids.add(webhook_id)
        print(f"accepted {webhook_id} with {payload['count']} events: {','.join(results)}", flush=True)
        self.answer(204)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format, *args):
        pass  # no access log line per request


# One request at a time (HTTPServer, not ThreadingHTTPServer): the sets and
# dict above are updated without locks.
server = HTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8080"))), Receiver)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
