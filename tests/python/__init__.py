"""Python tests of libshard's CPython extension, libshard.torch and libshard.webdataset."""
