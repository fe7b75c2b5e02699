"""The `--report DIR` folder of build and test.

model.py   what the manifest says of each image (versions, sizes, results), and summary.md
writer.py  gather it from the outcomes and the engine, write manifest.json, summary.md, junit.xml
sbom.py    a CycloneDX SBOM per image, by syft
"""
