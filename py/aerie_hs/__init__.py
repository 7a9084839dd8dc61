"""aerie's own Python for GPU hosts, shipped to the host by aerie and run in the host's Python.

Stdlib-only unless a module says otherwise (tokens.py needs transformers, which every target
environment has).
"""
