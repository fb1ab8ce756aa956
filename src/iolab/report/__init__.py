"""Stored runs and comparisons as tables (one model, drawn as terminal, Markdown, CSV), JSON
documents, charts and one self-contained HTML page. Imports ``workflows/`` and below; prints nothing.
"""
