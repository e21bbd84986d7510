"""Content-addressed result store (diskcache)."""

from .store import DEFAULT_DIR, CacheUnavailable, Store

__all__ = ["DEFAULT_DIR", "CacheUnavailable", "Store"]
