"""Decisions over runs, returned as data: golden baselines and the gate, comparison of two runs,
checkpoint recommendation, flaky cases, sample-size plans, adaptive gating. Only report/ formats."""
