"""The static website endpoint (docs/website.md): a bucket's public objects served over plain
HTTP on a port of their own, by AWS's rules for website endpoints."""

from __future__ import annotations

from .endpoint import ObjectReads, build_website

__all__ = ["ObjectReads", "build_website"]
