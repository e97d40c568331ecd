"""Bounded evaluation of untrusted suite content: the caps, the regex engine (RE2, or a timed
backtracking engine), the jinja2 sandbox with its budgets, JSON Schema validators that never
retrieve and match patterns in bounded time, and compiled schema validity checks.
Every other package that runs something a suite wrote goes through here. Also numpy, for the
whole package: loaded at its first use, with OpenBLAS's idle threads told to sleep (``numeric``)."""
