"""The smoke suites that run inside an image (or on a host): a pytest plugin and its suites.

The probe scripts they run live in torchimages.probes (below both this package and building.verify).

    plugin.py     pytest options, markers, fixtures, report hooks (`-p torchimages.smoke.plugin`)
    hosts.py      what the suites ask of a testinfra host (backend, nvcc, a root view, docker inspect)
    diagnosis.py  why no GPU is usable: no device, an old driver, a small /dev/shm
    document.py   the spec document (SPEC.json) the suites compare against: write, load, validate
    checks.py     which checks apply to which flavor: one table
    runner.py     run the suites against an image's container or local://, JUnit out
    cluster.py    several nodes on one machine: containers of the image on a network of their own
    platform.py   what cluster platforms change (any uid, a read-only root, RDMA) and the fixes to say
    suites/       the test modules: cpu, gpu, multi_gpu, multi_node (markers of the same names)

See docs/smoke-suites.md.
"""

SUITES = ("cpu", "gpu", "multi_gpu", "multi_node")
