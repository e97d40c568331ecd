"""leader-eval: evaluate and regression-test fine-tuned agent checkpoints."""

from __future__ import annotations

__version__ = "0.1.0"
