"""The ops; each module holds its kernel and a wrapper."""
