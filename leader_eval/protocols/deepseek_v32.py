"""``deepseek_v32``: DeepSeek-V3.2's DSML ``<｜DSML｜function_calls>`` blocks (see ``_dsml.py``)."""

from __future__ import annotations

from leader_eval.protocols import _dsml

# V4's templates never say function_calls: the first DSML protocol claims only V3.2's
PROTOCOL = _dsml.make("deepseek_v32", "function_calls", "tool_calls", (f"{_dsml.D}function_calls", "'function_calls>"))
