"""A run end to end: options (one flag table for the CLI and the plugin), evaluate (sample, score,
write), the run manifest, merging shards."""
