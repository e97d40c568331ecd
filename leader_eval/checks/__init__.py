"""Pure detectors: each check reads one output (and the case's compiled expectations) and returns
``CheckResult``s; no I/O, no knowledge of runs or backends. The scorer (scoring/scorer.py) runs them."""
