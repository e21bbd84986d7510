"""genlib: pointwise ops whose kernels are written to a cache module at run time."""
