"""A run end to end: options (one flag table for the CLI and the plugin), evaluate (sample, score,
record), scoring while sampling, the run manifest, merging shards. Joins sampling and scoring,
which never import each other."""
