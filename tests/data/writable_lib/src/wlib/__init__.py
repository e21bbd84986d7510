"""wlib: one op, and a test suite that writes files beside itself."""
