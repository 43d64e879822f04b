#!/usr/bin/python3
"""Uploads FILE as s3://BUCKET/KEY to the emulator at ENDPOINT with boto3 (Debian
python3-boto3): an independent client and SigV4 signer puts the objects the reader then gets.
Keys S3RVER/S3RVER, region us-east-1, path-style.
usage: s3_put.py ENDPOINT BUCKET KEY FILE
       s3_put.py ENDPOINT BUCKET KEY --presign SECONDS   prints a presigned GET URL"""
import sys

import boto3
from botocore.config import Config

endpoint, bucket, key, path = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="S3RVER", aws_secret_access_key="S3RVER",
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
if path == "--presign":
    print(s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key},
                                    ExpiresIn=int(sys.argv[5])))
else:
    with open(path, "rb") as f:
        s3.put_object(Bucket=bucket, Key=key, Body=f.read())
