"""The ``engram`` command line."""
