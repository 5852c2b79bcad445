"""The one run loop (loop.py) and what feeds it: the run spec and plan (spec.py),
imports of fio output from elsewhere (importer.py)."""
