"""Types of the compiled word n-gram counter (leader_eval/checks/_ngrams.pyx)."""

from collections.abc import Iterable

class PromptIndex:
    n: int
    vocabulary: int
    complete: bool
    def __init__(self, text: str, n: int, probes_per_word: int = 64) -> None: ...

def counts(
    text: str, n: int, prompt: PromptIndex | None = None, probes_per_word: int = 64
) -> tuple[int, int, int] | None: ...
def first_repeat(text: str, length: int, probes_per_window: int = 64) -> tuple[int, int] | None: ...

class EchoGrams:
    gram: int
    stride: int
    def __init__(self, grams: Iterable[tuple[bytes, ...]], gram: int, stride: int) -> None: ...
    def candidate(self, text: str) -> bool: ...
