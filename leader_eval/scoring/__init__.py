"""Scoring: a run's verdicts are a pure function of its records. The scorer (checks in a list
over one parsed output), episode scoring fed its steps, aggregation with intervals, the public
score API and the BFCL converter. Never imports sampling."""
