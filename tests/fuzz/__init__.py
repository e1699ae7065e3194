"""Mutation fuzzing of every statemorph decoder family, and hostile-directory faults for the CLI.

``python -m tests.fuzz`` runs the long version (see docs/reliability.md); the pytest files here
run a bounded budget in CI (``STATEMORPH_FUZZ_INPUTS`` inputs per family).
"""
