"""The suite: records, YAML loading with line numbers, files confined to the suite's root, tool
schemas, strict rendering, chat templates, episode specs and worlds, gate declarations, lint."""
