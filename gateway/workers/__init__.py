"""The background workers: lifecycle expiry, and the delivery of server access log records.
They act through the Store and the one write path (s3/writes.py), as a request would; the
application starts and stops them, and nothing in s3/ imports them."""
