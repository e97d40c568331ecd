"""``functiongemma``: FunctionGemma's tool calls (Gemma 3 270M tuned for function calling),
written in the syntax of ``gemma4`` with its own control tokens::

    <start_function_call>call:NAME{key:<escape>text<escape>,n:15,ok:true}<end_function_call>

Strings run between two ``<escape>`` tokens, unescaped; numbers, ``true``/``false`` and ``None``
are bare; objects and arrays nest (``gemma4.Syntax``). Calls follow one another, and the model
stops at ``<start_function_response>`` (the tool's turn, Google's documented extra stop
sequence), which may end the output.
"""

from __future__ import annotations

from leader_eval.protocols.gemma4 import Syntax, protocol

FUNCTIONGEMMA = Syntax(
    "functiongemma", "<start_function_call>", "<end_function_call>", "<escape>", "<start_function_response>"
)

PROTOCOL = protocol(FUNCTIONGEMMA, ("<start_function_call>",))
