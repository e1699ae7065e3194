"""Spark tests share the session-wide ``spark`` fixture of tests/conftest.py."""
