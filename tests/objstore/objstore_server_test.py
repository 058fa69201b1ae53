#!/usr/bin/env python3
"""objstore_server.py is as strict as S3 where a client bug would otherwise pass unseen: each
rejection (region, scope date, x-amz-date skew in both directions, unsigned x-amz-* headers,
missing payload hash) beside the same request accepted, and botocore's own requests (path
and virtual-hosted style) accepted and cross-checked. Run: python3 objstore_server_test.py
"""
import datetime
import hashlib
import http.client
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("objstore_server",
                                              os.path.join(HERE, "objstore_server.py"))
srv = importlib.util.module_from_spec(spec)
spec.loader.exec_module(srv)

AK, SK = "hdmlptestkey", "hdmlp/test/secret"
EMPTY = hashlib.sha256(b"").hexdigest()


class Strict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="objstore-strict-")
        os.makedirs(os.path.join(cls.root, "bucket"))
        with open(os.path.join(cls.root, "bucket", "obj"), "wb") as f:
            f.write(b"hello")
        cls.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "objstore_server.py"), "--root", cls.root,
             "--s3", "--botocore-check", "--dns-name", "localhost"],
            stdout=subprocess.PIPE, text=True)
        line = cls.proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError("objstore_server.py did not start (botocore missing?)")
        cls.port = int(line.split()[1])

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()
        cls.proc.stdout.close()
        shutil.rmtree(cls.root)

    def stats(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.request("GET", "/_stats")
        out = json.loads(c.getresponse().read())
        c.close()
        return out

    def send(self, when=None, scope_date=None, region="us-east-1", extra=None, signed_extra=True,
             content_sha=True):
        """A GET of /bucket/obj signed here (objstore_server.sigv4_expected, checked against
        AWS's vectors through the C signer's tests) with the given faults; (status, body)."""
        when = when or datetime.datetime.utcnow()
        amz_date = when.strftime("%Y%m%dT%H%M%SZ")
        host = f"127.0.0.1:{self.port}"
        hdrs = {"host": host, "x-amz-date": amz_date}
        if content_sha:
            hdrs["x-amz-content-sha256"] = EMPTY
        sent = dict(hdrs)
        for k, v in (extra or {}).items():
            sent[k] = v
            if signed_extra:
                hdrs[k] = v
        signed = sorted(hdrs)
        scope = f"{scope_date or amz_date[:8]}/{region}/s3/aws4_request"
        sig = srv.sigv4_expected("GET", "/bucket/obj", "", hdrs, signed, EMPTY, amz_date, scope,
                                 SK)
        sent["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={AK}/{scope}, "
                                 f"SignedHeaders={';'.join(signed)}, Signature={sig}")
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.putrequest("GET", "/bucket/obj", skip_host=True, skip_accept_encoding=True)
        for k, v in sent.items():
            c.putheader(k, v)
        c.endheaders()
        r = c.getresponse()
        out = r.status, r.read().decode()
        c.close()
        return out

    def test_valid_request_is_accepted(self):
        self.assertEqual(self.send(), (200, "hello"))
        self.assertEqual(self.send(extra={"x-amz-meta-a": "b"}), (200, "hello"))

    def test_wrong_region_is_refused(self):
        st, body = self.send(region="eu-west-1")
        self.assertEqual(st, 400)
        self.assertIn("AuthorizationHeaderMalformed", body)
        self.assertIn("expecting 'us-east-1'", body)

    def test_scope_date_other_than_x_amz_date_is_refused(self):
        now = datetime.datetime.utcnow()
        other = (now - datetime.timedelta(days=1)).strftime("%Y%m%d")
        st, body = self.send(when=now, scope_date=other)
        self.assertEqual(st, 400)
        self.assertIn("Date is not the same as X-Amz-Date", body)

    def test_clock_skew_beyond_15_minutes_is_refused(self):
        now = datetime.datetime.utcnow()
        for delta in (datetime.timedelta(hours=-1), datetime.timedelta(days=-400),
                      datetime.timedelta(hours=1)):
            st, body = self.send(when=now + delta)
            self.assertEqual(st, 403, delta)
            self.assertIn("RequestTimeTooSkewed", body)
        for delta in (datetime.timedelta(minutes=-14), datetime.timedelta(minutes=14)):
            self.assertEqual(self.send(when=now + delta)[0], 200, delta)

    def test_unsigned_x_amz_header_is_refused(self):
        st, body = self.send(extra={"x-amz-meta-a": "b"}, signed_extra=False)
        self.assertEqual(st, 403)
        self.assertIn("not signed: x-amz-meta-a", body)
        # Other headers need not be signed.
        self.assertEqual(self.send(extra={"accept": "*/*"}, signed_extra=False)[0], 200)

    def test_missing_payload_hash_is_refused(self):
        st, body = self.send(content_sha=False)
        self.assertEqual(st, 400)
        self.assertIn("x-amz-content-sha256", body)

    def test_botocore_requests_accepted_and_cross_checked(self):
        import botocore.config
        import botocore.session
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials
        before = self.stats()
        c = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=f"http://127.0.0.1:{self.port}",
            aws_access_key_id=AK, aws_secret_access_key=SK,
            config=botocore.config.Config(s3={"addressing_style": "path"}))
        c.put_object(Bucket="bucket", Key="dir/./p/../k", Body=b"x" * 100)
        got = c.get_object(Bucket="bucket", Key="dir/./p/../k", Range="bytes=1-3")
        self.assertEqual(got["Body"].read(), b"xxx")
        # Virtual-hosted style: bucket.localhost does not resolve here, so botocore signs for
        # that Host and the request goes to 127.0.0.1 with it.
        host = f"bucket.localhost:{self.port}"
        req = AWSRequest(method="GET", url=f"http://{host}/dir/./p/../k")
        S3SigV4Auth(Credentials(AK, SK), "s3", "us-east-1").add_auth(req)
        h = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        h.putrequest("GET", "/dir/./p/../k", skip_host=True, skip_accept_encoding=True)
        h.putheader("Host", host)
        for k, v in req.headers.items():
            h.putheader(k, v)
        h.endheaders()
        r = h.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"x" * 100))
        h.close()
        after = self.stats()
        self.assertEqual(after.get("botocore_mismatch", 0), 0)
        self.assertGreaterEqual(after["botocore_checked"] - before.get("botocore_checked", 0), 3)

if __name__ == "__main__":
    unittest.main(verbosity=2)
