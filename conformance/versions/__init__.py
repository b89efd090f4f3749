"""The version matrix (`conformance versions`): SDK releases x engine releases.

catalogue.py: the releases (releases.yaml); envs.py: one cached environment per SDK release;
run.py: the cells as `conformance run` processes; cells.py and matrix.py: the verdicts and the report.
"""
