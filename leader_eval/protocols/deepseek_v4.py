"""``deepseek_v4``: DeepSeek-V4's DSML ``<｜DSML｜tool_calls>`` blocks (see ``_dsml.py``)."""

from __future__ import annotations

from leader_eval.protocols import _dsml

# after deepseek_v32 in the registry: any other template speaking DSML is V4's
PROTOCOL = _dsml.make("deepseek_v4", "tool_calls", "function_calls", (_dsml.D,))
