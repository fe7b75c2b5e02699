"""The `--report DIR` folder of build and test.

model.py     what the report says of each image (versions, sizes, results), as frozen dataclasses
manifest.py  manifest.json, as data/manifest.schema.json describes it
summary.py   summary.md, a Markdown table for a CI step summary
junit.py     one image's JUnit results read back, and junit.xml with a testsuite per image
writer.py    gather it from the outcomes and the engine, write manifest.json, summary.md, junit.xml
sbom.py      a CycloneDX SBOM per image, by syft (its SPDX attestation converted, else a scan)
"""
