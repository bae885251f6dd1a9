"""Test support shared by several test files (importable as ``support`` from tests/)."""
