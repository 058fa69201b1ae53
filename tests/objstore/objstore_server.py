#!/usr/bin/env python3
"""A small object store for hdmlp's tests and benchmarks, on 127.0.0.1 only (stdlib).

Serves the files under --root over HTTP/1.1 with keep-alive: GET (one byte range or the
whole object), HEAD and, with --s3, PUT, DELETE and multipart uploads (POST ?uploads,
PUT ?partNumber&uploadId, POST ?uploadId, DELETE ?uploadId) and one-page ListObjectsV2
(GET /bucket?list-type=2&prefix=P). With --s3 the first path
element is the bucket (path-style addressing, as MinIO-like servers), or with --dns-name D
a Host "BUCKET.D[:port]" names it (virtual-hosted style). Keys are literal, "." and ".."
segments included (stored under escaped file names).

With --s3 every request must carry a valid AWS Signature V4 for --access-key/--secret-key
(checked independently of the C signer: recomputed here from the request as received), as
strictly as S3 checks it: the credential scope's region must be --region (400
AuthorizationHeaderMalformed), its date that of x-amz-date (400 AuthorizationHeaderMalformed),
x-amz-date within 15 minutes of this machine's clock (403 RequestTimeTooSkewed),
x-amz-content-sha256 present and the body's hash or UNSIGNED-PAYLOAD, every x-amz-* header
sent signed (403 AccessDenied, "headers not signed"); other failures answer S3's XML errors
(403 SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied; 404 NoSuchBucket, NoSuchKey).
With --botocore-check each signed request is also signed by botocore's S3SigV4Auth on the
same inputs (method, URL as received, the headers the client signed, body, keys, region,
date); the counters botocore_checked and botocore_mismatch count them (a mismatch is
printed on stderr).

Fault injection (for GETs of objects named segment-*): --fault KIND:PERIOD[:LIMIT][,...]
applies KIND to every PERIOD-th such request (at most LIMIT times when given): 503 (Service Unavailable), drop (the connection
closes after half of the body), truncate (a Content-Length the body does not reach, then
close), stall (sends half of the body then goes silent for --stall-seconds), drip (sends
the body a byte a second), badrange (a 206 with the bytes and Content-Range of a range one
byte further on), and for GETs of objects named index: indexcut (no Content-Length, half of
the body, then close). --latency-ms delays every answer; --bandwidth caps the rate of all
answers together (bytes/s). Counters of requests and faults are answered at GET /_stats as
JSON. --also-port P serves on 127.0.0.1:P too (e.g. 80). Prints "PORT <n>" once listening.
"""
import argparse
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import socketserver
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


SKEW = datetime.timedelta(minutes=15)


def escape_part(p):
    """A key's path element as a file name: '%' and dot segments escaped, so that "x/../y"
    is a key of its own, as in S3."""
    p = p.replace("%", "%25")
    return p.replace(".", "%2E") if p in (".", "..") else p


def unescape_part(p):
    p = {"%2E": ".", "%2E%2E": ".."}.get(p, p)
    return p.replace("%25", "%")


def botocore_signature(method, url, headers, signed, body, access_key, secret_key, region,
                       amz_date, token):
    """botocore's S3SigV4Auth on the same inputs; returns its Authorization header."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    class FixedDate(S3SigV4Auth):
        def add_auth(self, request):
            request.context["timestamp"] = amz_date
            self._modify_request_before_signing(request)
            canonical = self.canonical_request(request)
            sts = self.string_to_sign(request, canonical)
            self._inject_signature_to_request(request, self.signature(sts, request))

    hdrs = {h: headers[h] for h in signed if h not in ("host", "x-amz-date",
                                                         "x-amz-content-sha256",
                                                         "x-amz-security-token")}
    req = AWSRequest(method=method, url=url, data=body, headers=hdrs)
    FixedDate(Credentials(access_key, secret_key, token), "s3", region).add_auth(req)
    return req.headers["Authorization"]


def sigv4_expected(method, raw_path, query, headers, signed, payload_hash, amz_date, scope,
                   secret):
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    cq = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                  for k, v in pairs)
    canon_headers = "".join(f"{h}:{' '.join(headers.get(h, '').split())}\n" for h in signed)
    canon = "\n".join([method, raw_path, cq, canon_headers, ";".join(signed), payload_hash])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
    date, region, service, _ = scope.split("/")
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def setup(self):
        super().setup()
        # Headers and body leave in separate writes: without this, Nagle's algorithm holds
        # the body until the client's delayed ACK (40 ms a request).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.count("connections")

    # -- helpers ---------------------------------------------------------------------------
    def count(self, key):
        with self.server.lock:
            self.server.stats[key] = self.server.stats.get(key, 0) + 1
            return self.server.stats[key]

    def error(self, status, code, message):
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
                f"<Message>{message}</Message></Error>").encode()
        self.count(f"status_{status}")
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def delay(self):
        if self.server.opts.latency_ms > 0:
            time.sleep(self.server.opts.latency_ms / 1000.0)

    def write_body(self, data):
        """Writes data; with --bandwidth, all answers together stay under that rate (a
        shared link: each piece takes its turn on one clock)."""
        rate = self.server.opts.bandwidth
        if rate <= 0:
            self.wfile.write(data)
            return
        step = 65536
        for off in range(0, len(data), step):
            piece = data[off:off + step]
            with self.server.lock:
                start = max(time.monotonic(), self.server.link_free)
                self.server.link_free = start + len(piece) / rate
                done = self.server.link_free
            wait = done - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self.wfile.write(piece)

    def check_auth(self, body):
        o = self.server.opts
        if not o.s3:
            return True
        auth = self.headers.get("Authorization")
        if auth is None:
            self.error(403, "AccessDenied", "Anonymous access is forbidden")
            return False
        m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8}/[^/]+/s3/aws4_request), "
                         r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
        if m is None:
            self.error(400, "AuthorizationHeaderMalformed", "bad Authorization header")
            return False
        key, scope, signed, sig = m.groups()
        if key != o.access_key:
            self.error(403, "InvalidAccessKeyId", "The AWS Access Key Id does not exist")
            return False
        signed = signed.split(";")
        hdrs = {k.lower(): v for k, v in self.headers.items()}
        if "host" not in signed or "x-amz-date" not in signed:
            self.error(403, "AccessDenied", "host and x-amz-date must be signed")
            return False
        scope_date, region = scope.split("/")[0:2]
        if region != o.region:
            self.count("rejected_region")
            self.error(400, "AuthorizationHeaderMalformed",
                       f"the region '{region}' is wrong; expecting '{o.region}'")
            return False
        amz_date = hdrs.get("x-amz-date", "")
        try:
            when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")
        except ValueError:
            self.error(403, "AccessDenied", "x-amz-date is not YYYYMMDDTHHMMSSZ")
            return False
        if scope_date != amz_date[:8]:
            self.count("rejected_scope_date")
            self.error(400, "AuthorizationHeaderMalformed",
                       "Invalid credential date. Date is not the same as X-Amz-Date.")
            return False
        if abs(when - datetime.datetime.utcnow()) > SKEW:
            self.count("rejected_skew")
            self.error(403, "RequestTimeTooSkewed",
                       "The difference between the request time and the current time is "
                       "too large.")
            return False
        unsigned = sorted(h for h in hdrs if h.startswith("x-amz-") and h not in signed)
        if unsigned:
            self.count("rejected_unsigned")
            self.error(403, "AccessDenied", "There were headers present in the request which "
                       "were not signed: " + ", ".join(unsigned))
            return False
        if "x-amz-content-sha256" not in hdrs:
            self.error(400, "InvalidRequest",
                       "Missing required header for this request: x-amz-content-sha256")
            return False
        payload = hdrs["x-amz-content-sha256"]
        if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
            self.error(400, "XAmzContentSHA256Mismatch", "payload hash does not match")
            return False
        raw_path, _, query = self.path.partition("?")
        want = sigv4_expected(self.command, raw_path, query, hdrs, signed, payload,
                              amz_date, scope, o.secret_key)
        if not hmac.compare_digest(want, sig):
            self.count("bad_signatures")
            self.error(403, "SignatureDoesNotMatch", "The request signature does not match")
            return False
        if o.botocore_check:
            self.botocore_check(hdrs, signed, body, amz_date)
        return True

    def botocore_check(self, hdrs, signed, body, amz_date):
        o = self.server.opts
        url = f"http://{hdrs.get('host', '')}{self.path}"
        theirs = botocore_signature(self.command, url, hdrs, signed, body, o.access_key,
                                    o.secret_key, o.region, amz_date,
                                    hdrs.get("x-amz-security-token"))
        self.count("botocore_checked")
        if theirs != self.headers.get("Authorization"):
            self.count("botocore_mismatch")
            print(f"botocore signs {self.command} {url} otherwise:\n ours     "
                  f"{self.headers.get('Authorization')}\n botocore {theirs}",
                  file=sys.stderr, flush=True)

    def local_path(self):
        raw_path = self.path.partition("?")[0]
        parts = [urllib.parse.unquote(p) for p in raw_path.split("/") if p]
        o = self.server.opts
        host = self.headers.get("Host", "").rsplit(":", 1)[0].lower()
        if o.s3 and o.dns_name and host.endswith("." + o.dns_name):
            parts.insert(0, host[:-len(o.dns_name) - 1])  # virtual-hosted style
        if not o.s3 and any(p in (".", "..") for p in parts):
            return None, None
        parts = [escape_part(p) for p in parts]
        if o.s3:
            if not parts or not os.path.isdir(os.path.join(o.root, parts[0])):
                return None, "NoSuchBucket"
        return os.path.join(o.root, *parts), None

    # -- methods ---------------------------------------------------------------------------
    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        n = self.count("requests")
        if self.path == "/_stats":
            with self.server.lock:
                body = json.dumps(self.server.stats).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.delay()
        if not self.check_auth(b""):
            return
        path, err = self.local_path()
        if path is None:
            self.error(404, err or "NoSuchKey", "no such bucket" if err else "bad key")
            return
        query = urllib.parse.parse_qs(self.path.partition("?")[2], keep_blank_values=True)
        if self.server.opts.s3 and "list-type" in query and os.path.isdir(path):
            self.list_objects(path, query.get("prefix", [""])[0])
            return
        if not os.path.isfile(path):
            self.error(404, "NoSuchKey", "The specified key does not exist.")
            return
        size = os.path.getsize(path)
        rng = self.headers.get("Range")
        start, end = 0, size - 1
        status = 200
        if rng is not None:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if m is None:
                self.error(400, "InvalidRange", "one range only")
                return
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            if start >= size:
                self.error(416, "InvalidRange", "The requested range is not satisfiable")
                return
            status = 206
        length = end - start + 1
        fault = None
        base = os.path.basename(path)
        if self.command == "GET" and (base.startswith("segment-") or base == "index"):
            k = self.count("segment_gets" if base != "index" else "index_gets")
            for i, (kind, period, limit) in enumerate(self.server.faults):
                if (kind == "indexcut") == (base == "index") and k % period == 0:
                    if limit and self.count(f"fault_{i}_applied") > limit:
                        continue
                    fault = kind
                    break
        if fault == "badrange" and status == 206 and size > length:
            shift = 1 if end + 1 < size else -1
            start, end = start + shift, end + shift
            self.count("fault_badrange")
        if fault == "indexcut":
            self.count("fault_indexcut")
            with open(path, "rb") as f:
                data = f.read()
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if fault == "503":
            self.count("fault_503")
            self.error(503, "SlowDown", "Please reduce your request rate.")
            return
        self.send_response(status)
        self.send_header("Accept-Ranges", "bytes")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(length if fault != "truncate"
                                                else length + 1000))
        if fault in ("drop", "truncate"):
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if self.server.opts.bandwidth <= 0 and fault in (None, "badrange"):
            # The kernel copies the file: the server's own speed stays out of the figures.
            with open(path, "rb") as f:
                sent = 0
                while sent < length:
                    n = os.sendfile(self.connection.fileno(), f.fileno(), start + sent,
                                    length - sent)
                    if n == 0:
                        break
                    sent += n
            self.count("bytes_sent_" + ("206" if status == 206 else "200"))
            return
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(length)
        if fault == "drip":
            self.count("fault_drip")
            try:
                for i in range(len(data)):
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1.0)
            except OSError:
                pass
            self.close_connection = True
            return
        if fault in ("drop", "truncate", "stall"):
            self.count("fault_" + fault)
            half = data[:len(data) // 2] if fault != "truncate" else data
            self.wfile.write(half)
            self.wfile.flush()
            if fault == "stall":
                time.sleep(self.server.opts.stall_seconds)
            self.close_connection = True
            return
        self.write_body(data)
        self.count("bytes_sent_" + ("206" if status == 206 else "200"))

    def list_objects(self, bucket_dir, prefix):
        """ListObjectsV2 (one page): the keys under prefix, sizes."""
        items = []
        for d, dirs, files in os.walk(bucket_dir):
            dirs.sort()
            rel = os.path.relpath(d, bucket_dir)
            parts = [] if rel == "." else [unescape_part(p) for p in rel.split(os.sep)]
            for f in sorted(files):
                key = "/".join(parts + [unescape_part(f)])
                if key.startswith(prefix) and not f.endswith(".part"):
                    items.append((key, os.path.getsize(os.path.join(d, f))))
        esc = lambda t: t.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult>'
                f"<Prefix>{esc(prefix)}</Prefix><KeyCount>{len(items)}</KeyCount>"
                "<IsTruncated>false</IsTruncated>" +
                "".join(f"<Contents><Key>{esc(k)}</Key><Size>{n}</Size></Contents>"
                        for k, n in sorted(items)) + "</ListBucketResult>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def writable(self):
        """Reads the body, checks the signature; returns (body, path, query) or None."""
        self.count("requests")
        self.delay()
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length) if length else b""
        if not self.server.opts.s3:
            self.error(405, "MethodNotAllowed", "read-only")
            return None
        if not self.check_auth(body):
            return None
        path, err = self.local_path()
        if path is None or err:
            self.error(404, err or "NoSuchKey", "no such bucket")
            return None
        query = urllib.parse.parse_qs(self.path.partition("?")[2], keep_blank_values=True)
        return body, path, query

    def answer(self, status, body=b"", etag=None):
        self.send_response(status)
        if etag is not None:
            self.send_header("ETag", etag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def upload_dir(self, query):
        uid = query.get("uploadId", [""])[0]
        d = os.path.join(self.server.opts.root, ".uploads", uid)
        return d if re.fullmatch(r"[0-9a-f]{32}", uid) and os.path.isdir(d) else None

    def do_PUT(self):
        got = self.writable()
        if got is None:
            return
        body, path, query = got
        etag = '"' + hashlib.md5(body).hexdigest() + '"'
        if "partNumber" in query:
            d = self.upload_dir(query)
            if d is None:
                self.error(404, "NoSuchUpload", "no such upload")
                return
            with open(os.path.join(d, "%05d" % int(query["partNumber"][0])), "wb") as f:
                f.write(body)
            self.count("parts")
            self.answer(200, etag=etag)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
        self.count("puts")
        self.answer(200, etag=etag)

    def do_POST(self):
        got = self.writable()
        if got is None:
            return
        body, path, query = got
        if "uploads" in query:
            uid = os.urandom(16).hex()
            os.makedirs(os.path.join(self.server.opts.root, ".uploads", uid))
            self.count("multipart_started")
            self.answer(200, ("<InitiateMultipartUploadResult><UploadId>%s</UploadId>"
                              "</InitiateMultipartUploadResult>" % uid).encode())
            return
        d = self.upload_dir(query)
        if d is None:
            self.error(404, "NoSuchUpload", "no such upload")
            return
        parts = re.findall(r"<PartNumber>(\d+)</PartNumber><ETag>([^<]*)</ETag>", body.decode())
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".part"
        with open(tmp, "wb") as out:
            for i, (num, etag) in enumerate(parts):
                name = os.path.join(d, "%05d" % int(num))
                data = open(name, "rb").read() if os.path.exists(name) else None
                if int(num) != i + 1 or data is None or \
                        etag != '"' + hashlib.md5(data).hexdigest() + '"':
                    self.error(400, "InvalidPart", "part %s missing or ETag differs" % num)
                    return
                out.write(data)
        os.replace(tmp, path)
        shutil.rmtree(d)
        self.count("multipart_completed")
        self.answer(200, b"<CompleteMultipartUploadResult></CompleteMultipartUploadResult>")

    def do_DELETE(self):
        got = self.writable()
        if got is None:
            return
        _, path, query = got
        if "uploadId" in query:
            d = self.upload_dir(query)
            if d is not None:
                shutil.rmtree(d)
                self.count("multipart_aborted")
        elif os.path.isfile(path):
            os.unlink(path)
            self.count("deletes")
        self.answer(204)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--s3", action="store_true")
    ap.add_argument("--access-key", default="hdmlptestkey")
    ap.add_argument("--secret-key", default="hdmlp/test/secret")
    ap.add_argument("--fault", default="")
    ap.add_argument("--latency-ms", type=float, default=0.0)
    ap.add_argument("--bandwidth", type=float, default=0.0)
    ap.add_argument("--stall-seconds", type=float, default=30.0)
    ap.add_argument("--region", default="us-east-1")
    ap.add_argument("--dns-name", default="")
    ap.add_argument("--botocore-check", action="store_true")
    ap.add_argument("--also-port", type=int, default=0)
    o = ap.parse_args()
    if o.botocore_check:
        import botocore.auth  # noqa: F401  (fails here, at start, when botocore is missing)
    srv = Server(("127.0.0.1", o.port), Handler)
    srv.opts = o
    srv.lock = threading.Lock()
    srv.stats = {}
    srv.link_free = 0.0
    srv.faults = []
    for item in filter(None, o.fault.split(",")):
        kind, period, limit = (item + ":0").split(":")[:3]
        assert kind in ("503", "drop", "truncate", "stall", "drip", "badrange",
                        "indexcut"), kind
        srv.faults.append((kind, int(period), int(limit)))
    if o.also_port:
        extra = Server(("127.0.0.1", o.also_port), Handler)
        extra.__dict__.update({k: getattr(srv, k) for k in ("opts", "lock", "stats",
                                                           "link_free", "faults")})
        threading.Thread(target=extra.serve_forever, daemon=True).start()
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
