"""The run store: the only code that names or shape-checks a run file (run directory, record
logs, atomic writes, locks), the file-format versions and the cross-run sample cache."""
