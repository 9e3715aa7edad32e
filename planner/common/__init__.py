"""Helpers every stage uses: names and values in messages, output files."""
