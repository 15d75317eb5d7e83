"""Named SQL of the background jobs."""
