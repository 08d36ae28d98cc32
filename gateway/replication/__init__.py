"""Bucket replication (docs/replication.md): the ReplicationConfiguration a bucket keeps
(configuration.py) and the operator's remote destinations (remotes.py)."""
