"""Turning a plan into verified, tagged images.

builder.py    build each image, verify what it holds, run the smoke gate, only then tag and push
requests.py   the build's options, each image's BuildKit build, the refusal of shared public names
references.py temporary references, and images baked elsewhere waiting under one for promotion
readings.py   what the builder reads on the way: sizes against budgets, what an image holds, why a build failed
outcome.py    what happened to each image, and the summary table
verify.py     read the versions inside an image and compare them with what its tag promises
libraries.py  the NVIDIA libraries torch loads (cuDNN, NCCL, cuBLAS, ...) are the pinned wheels' files, once
bootstrap.py  bootstrapped bases (debian12) made from the distribution archive
wheels.py     wheel sources: index URLs, local folders served for the build, pip.conf secrets
progress.py   what each running image is doing (stages, events), told to a renderer
buildkit_log.py BuildKit's plain log parsed into stages and bytes fetched, followed as it is written
renderers.py  the plain and the live (rich) renderers of progress
locks.py      requirements.lock: the packages of a built image, pinned
bake.py       a buildx bake file of the plan, and what a bake built, for promote
"""
