"""Bucket notifications (issue 41, docs/notifications.md): AWS's configuration and event records,
topics made at runtime through the SNS-compatible API, and the senders that deliver to them.

The protocol-free modules (configuration, events, records, topics, networks) import no aiohttp;
each sender (webhook.py) and the SNS query API (sns.py) sit in modules of their own."""
