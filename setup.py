"""The one compiled module (``leader_eval.checks._ngrams``: the degeneration checks' word n-gram
counter and the leak scan's scaffold-echo prefilter); everything else is in pyproject.toml.
``optional``: where it cannot be compiled, the install goes on and the same answers come from the
pure-Python paths (slower)."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize(
        [Extension("leader_eval.checks._ngrams", ["leader_eval/checks/_ngrams.pyx"], optional=True)],
        compiler_directives={"language_level": "3"},
    )
)
