"""SQL of the memory aggregates, one file each (versions, audit)."""
