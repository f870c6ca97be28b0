"""WebDataset's switch for run-time type checks of its modules (with typeguard, where it is
installed). libshard's modules are not instrumented: importing this changes nothing."""
modules = ["tenbin", "autodecode", "cache", "compat", "extradatasets", "filters", "gopen",
           "handlers", "mix", "pipeline", "shardlists", "tariterators", "utils", "writer"]
