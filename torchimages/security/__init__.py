"""The release gate's security checks: what an image must not hold, and what it must not lack, before it is
tagged; and whether a published image went stale since.

    model.py       findings, each check's result (passed, failed, not scanned, skipped) and the gate's
    allowlist.py   the repository's allowlist: an entry names a finding, why, and until when
    layers.py      credentials, private keys, the build's own secrets and stray files in any layer
    os_updates.py  installed OS packages with a newer version in the security suite of the image's sources
    python.py      known vulnerabilities of the venv's packages (pip-audit)
    gate.py        the checks in turn on one image, the allowlist applied: the gate's verdict
    signing.py     cosign: sign a pushed digest with the user's key, verify a reference's signature

Between building (which calls the gate before tagging) and the engine (which runs and exports images).
"""
