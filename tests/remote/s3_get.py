#!/usr/bin/python3
"""Downloads s3://BUCKET/KEY from the emulator at ENDPOINT into OUT with boto3 (Debian
python3-boto3): an independent client reads back what the writer uploaded. Keys S3RVER/S3RVER,
region us-east-1, path-style. Exits 3 when the key does not exist (NoSuchKey / 404).
usage: s3_get.py ENDPOINT BUCKET KEY OUT"""
import sys

import boto3
import botocore.exceptions
from botocore.config import Config

endpoint, bucket, key, out = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
try:
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
except botocore.exceptions.ClientError as e:
    if e.response["Error"]["Code"] in ("NoSuchKey", "404"):
        sys.exit(3)
    raise
with open(out, "wb") as f:
    f.write(body)
