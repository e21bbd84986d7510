"""The ops; each module holds its scalar jit function and a wrapper."""
