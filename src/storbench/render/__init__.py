"""Render analysis results as text, tables, charts and pages. Importing the package
loads nothing: each command imports the renderers it uses (render/formats.py holds
the registry of export formats)."""
