"""From a matrix file to a plan: read the rows, resolve each against the knowledge base, name the tags.

matrix.py     read and check matrix.yaml (its own grammar, located messages)
expansion.py  its located rows: axes, excludes and includes expanded (GitHub Actions semantics)
resolve.py    a row and the knowledge base -> a Combination, or the refusals that say why not
tags.py       tags and aliases (latest, torch minor, cuda major) across the plan
bases.py      registry bases, their mirror and their digest lock
plan.py       the whole plan: combinations, their images, selection by tag or glob
"""
