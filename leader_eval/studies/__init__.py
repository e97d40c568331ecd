"""Studies beside the gate: the long-context stress sweep and the train/eval overlap check."""
