"""Compiled Cython modules (sources in the top-level `_native/` folder), built by setup.py."""
