"""Content-addressed result store (diskcache)."""

from .store import DEFAULT_DIR, Store

__all__ = ["DEFAULT_DIR", "Store"]
