"""Markdown folders (SPEC §6.3): GBrain-compatible page files in and out.

``client.py`` reads and renders files (no database); ``sync.py`` applies a folder to a
source through the one page write path, and exports a source back to files.
"""
