"""Sampling: backends, the plan of what to sample, sample keys and seeds, the bounded-concurrency
sample loop and the episode loop. Never imports scoring."""
