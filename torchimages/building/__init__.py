"""Turning a plan into verified, tagged images.

builder.py    build each image, verify what it holds, run the smoke gate, only then tag and push
verify.py     read the versions inside an image and compare them with what its tag promises
bootstrap.py  bootstrapped bases (debian12) made from the distribution archive
wheels.py     wheel sources: index URLs, local folders served for the build, pip.conf secrets
progress.py   the build's progress, read from BuildKit's log as it is written
locks.py      requirements.lock: the packages of a built image, pinned
bake.py       a buildx bake file of the plan, and what a bake built, for promote
"""
