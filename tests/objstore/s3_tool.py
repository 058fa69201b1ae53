#!/usr/bin/env python3
"""botocore as the reference S3 client of the object-storage suite (rgw_suite.sh): reads
objects that hdmlp wrote and lists keys, at HDMLP_S3_ENDPOINT with HDMLP_S3_ACCESS_KEY /
HDMLP_S3_SECRET_KEY (path style, region us-east-1).

  s3_tool.py same BUCKET PREFIX DIR   every file of DIR equals object PREFIX/NAME byte for
                                      byte (exit 1 naming the first that differs)
  s3_tool.py has BUCKET KEY           the key exists exactly as written (exit 1 if not)
"""
import os
import sys

import botocore.config
import botocore.session


def client():
    return botocore.session.get_session().create_client(
        "s3", region_name="us-east-1", endpoint_url=os.environ["HDMLP_S3_ENDPOINT"],
        aws_access_key_id=os.environ["HDMLP_S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["HDMLP_S3_SECRET_KEY"],
        config=botocore.config.Config(s3={"addressing_style": "path"}))


def main(argv):
    c = client()
    if argv[1] == "same":
        bucket, prefix, d = argv[2:5]
        names = sorted(os.listdir(d))
        for name in names:
            key = f"{prefix}/{name}"
            got = c.get_object(Bucket=bucket, Key=key)["Body"].read()
            with open(os.path.join(d, name), "rb") as f:
                want = f.read()
            if got != want:
                print(f"s3://{bucket}/{key}: {len(got)} bytes differ from {d}/{name} "
                      f"({len(want)} bytes)", file=sys.stderr)
                return 1
        print(f"s3_tool: {len(names)} objects under s3://{bucket}/{prefix} equal {d}")
        return 0
    if argv[1] == "has":
        bucket, key = argv[2:4]
        keys = [o["Key"] for o in c.list_objects_v2(Bucket=bucket, Prefix=key).get(
            "Contents", [])]
        if key not in keys:
            print(f"s3://{bucket}: no key {key!r} (found {keys[:5]})", file=sys.stderr)
            return 1
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as e:  # one line naming what failed, not a traceback
        print(f"s3_tool {' '.join(sys.argv[1:])}: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
