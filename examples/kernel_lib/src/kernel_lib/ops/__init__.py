"""The ops; each module holds its kernels and a wrapper."""
