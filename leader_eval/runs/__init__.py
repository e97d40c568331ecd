"""Runs: the options of a run, its evaluation (sample, score, record), scoring while sampling,
and the merge of shards. Joins sampling and scoring, which never import each other."""
