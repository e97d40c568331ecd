"""Statistics: intervals, paired tests, Holm-Tarone, the gate statistic's simulation, and the
metric table that binds each metric to its test and interval."""
