"""`conformance mutate`: a mutation score of the scenario library on a real SDK's orchestration executor.

Mutants of the installed SDK's executor and task modules (generated and applied by cosmic-ray,
in a copy of the SDK's environment), each run against the scenarios whose coverage reaches the
mutated line (docs/mutation.md).
"""
