"""Mutation testing of the rules that keep tags true: `make mutants` (docs/mutants.md).

Each row of MUTATIONS plants one rule-breaking bug by hand: a file, its exact original text (found
exactly once), the replacement, and the rule it breaks. The runner copies the project's files to a
temporary folder (never touching the working tree: other runs may be going on), applies one mutation
at a time there, runs the unit tests that concern the mutated module (`-x`, quietly) and restores the
file. A mutation the tests fail on is killed; one they pass is a survivor. A survivor listed with a
`reviewed` reason (why it cannot change behaviour) is expected; any other survivor makes the exit
status 1. A row whose original text is no longer in its file (exactly once) is stale: exit status 2.

    .venv/bin/python bench/mutants.py [--jobs N] [--only ID[,ID...]] [--list] [--check]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "torchimages"


@dataclass(frozen=True)
class Mutation:
    """One planted bug: in `file` (relative to the package), `original` (found exactly once) becomes
    `replacement`; `rule` says what it breaks; `reviewed`, when set, why surviving cannot change behaviour."""

    id: str
    file: str
    original: str
    replacement: str
    rule: str
    reviewed: str = ""


M = Mutation
VERIFY, VERSIONS = "building/verify.py", "versions.py"
TAGS, RESOLVE = "planning/tags.py", "planning/resolve.py"
BUILDER, RUNNER, PUSH = "building/builder.py", "smoke/runner.py", "engine/push.py"
ZSTD = "engine/zstd_push.py"
REFERENCES, LIBRARIES = "building/references.py", "building/libraries.py"
CONSTRAINTS = "building/constraints.py"
VERIFY_ARCHS = "building/architectures.py"
PLUGIN, MULTI_GPU = "smoke/plugin.py", "smoke/suites/test_multi_gpu.py"
PLATFORMS, PLATFORM_WHEELS = "platforms.py", "planning/platform_wheels.py"
COMBINATION, REQUESTS, CLI_COMMON = "combination.py", "building/requests.py", "cli/common.py"
DOCTOR_CHECKS, DOCTOR_MODEL, DOCTOR_FACTS = "doctor/checks.py", "doctor/model.py", "doctor/facts.py"
DOCTOR_SELECTION, GPU_ARCHS, GPU_SUITE = "doctor/selection.py", "smoke/gpu_archs.py", "smoke/suites/test_gpu.py"
LAYERS = "security/layers.py"
LEAKS = "security/leaks.py"
TARSTREAM, CONTENT = "security/tarstream.py", "security/content.py"
ALLOWLIST, GATE, PYTHON_AUDIT = "security/allowlist.py", "security/gate.py", "security/python.py"
STALENESS = "security/staleness.py"
SIGNING, MULTI_NODE = "security/signing.py", "smoke/suites/test_multi_node.py"
STAGING, INDEX, MANIFESTS = "building/staging.py", "building/index.py", "engine/manifests.py"
SIGNATURES, CLI_JOIN, REGISTRY = "building/signatures.py", "cli/join.py", "registry.py"
DOCKER_ENGINE = "engine/docker_engine.py"
PROCESS = "engine/process.py"
ARCH_PROBE = "probes/scripts/cuda_archs.py"
OUTDATED, ENTRY, CLI = "cli/outdated.py", "cli/entry.py", "cli/__init__.py"
READINGS, RENDER = "building/readings.py", "render.py"
VENV_STEP, COMMON_STEP = "templates/steps/venv.sh.j2", "templates/steps/common.sh.j2"
KB_DERIVE, KB_DIFF, KB_INDEX, KB_SYNC = "kb/derive.py", "kb/diff.py", "kb/index.py", "kb/sync.py"
KB_WRITER, KB_PAGES, CLI_KB = "kb/writer.py", "kb/pages.py", "cli/kb.py"
COMPAT = "compat.py"
BOOTSTRAP, PROBE_PLATFORM = "building/bootstrap.py", "probes/scripts/platform.py"
FACTS_PROBE, CUDA_EXTENSION_PROBE = "probes/scripts/facts.py", "probes/scripts/cuda_extension.py"

# fmt: off
MUTATIONS: tuple[Mutation, ...] = (
    # --- verification: building/verify.py -------------------------------------------------------------
    M("verify-absent-any", VERIFY,
      "return expected is None and found is None",
      "return True",
      "a field absent on either side is 'nothing to check' (a CPU tag passes an image holding CUDA torch)"),
    M("verify-absent-claimed", VERIFY,
      "return expected is None and found is None",
      "return expected is None",
      "a field the tag says is absent is skipped: a CPU tag (no CUDA, no cuDNN) passes CUDA torch"),
    M("verify-missing-found", VERIFY,
      "return expected is None and found is None",
      "return found is None",
      "a field missing from the image (a companion library not installed) passes like a skip"),
    M("verify-torch-prefix", VERIFY,
      'return found.split("+")[0] == expected',
      "return found.startswith(expected)",
      "torch accepted on a text prefix (2.1.0 promised, 2.1.0x found; the local label unchecked either way)"),
    M("verify-cudnn-prefix", VERIFY,
      'return found == ".".join(expected.split(".")[:3])',
      "return expected.startswith(found)",
      "cuDNN accepted when the read-back version is a text prefix of the pin (9.1 for 9.10.2.21)"),
    M("verify-cudnn-major", VERIFY,
      'return found == ".".join(expected.split(".")[:3])',
      'return found.split(".")[0] == expected.split(".")[0]',
      "cuDNN compared by major only (9.5.1 accepted for 9.1.0.70)"),
    M("verify-exact-prefix", VERIFY,
      "    return found == expected\n",
      "    return found.startswith(expected)\n",
      "NCCL/CUDA/Python/OS accepted on a text prefix (NCCL 2.21.5 for 2.21.50, Python 3.1 for 3.11)"),
    M("verify-drop-nccl", VERIFY,
      "if not _same(name, value, facts.versions.get(name))",
      'if name != "nccl" and not _same(name, value, facts.versions.get(name))',
      "NCCL dropped from what verification compares"),
    M("verify-drop-torchvision", VERIFY,
      "if not _same(name, value, facts.versions.get(name))",
      'if name != "torchvision" and not _same(name, value, facts.versions.get(name))',
      "torchvision dropped from what verification compares"),
    M("verify-companion-public", VERIFY,
      "        return same_build(expected, found)\n",
      '        return found.split("+")[0] == expected.split("+")[0]\n',
      "a companion's local label ignored (torchaudio 2.11.1+cu132 in a cu130 image passes)"),
    # --- verification: versions.py -------------------------------------------------------------------
    M("versions-cuda-never-read", VERSIONS,
      '"cuda": None if raw.get("cuda") is None else str(raw["cuda"]),',
      '"cuda": None,',
      "torch's CUDA never read back: a CPU tag passes CUDA torch, a CUDA tag fails every image"),
    M("versions-cpu-keeps-cudnn", VERSIONS,
      'cuda_build = raw.get("cuda") is not None',
      "cuda_build = True",
      "a CPU-only torch's reported cuDNN/NCCL counted (a CPU image fails on what its torch says anyway)"),
    M("versions-cudnn9-boundary", VERSIONS,
      "if code >= 90000:",
      "if code > 90000:",
      "cuDNN 9.0.0 (code 90000) decoded with cuDNN 8's encoding"),
    M("versions-label-unchecked", VERSIONS,
      "return promised is None or local_label(found) == promised",
      "return True",
      "a companion's promised local label never compared"),
    M("versions-public-unchecked", VERSIONS,
      "    if public_version(found) != public_version(expected):\n        return False\n",
      "",
      "a companion's public version never compared (torchaudio 2.10.0+cu130 passes for 2.11.1+cu130)"),
    M("versions-public-keeps-label", VERSIONS,
      'return version.split("+", 1)[0]',
      "return version",
      "the public version keeps its local label (a bare promise of 2.11.1 refuses 2.11.1+cu130)"),
    # --- the GPU architectures an image holds: probes/scripts/cuda_archs.py -------------------------------
    M("archs-suffix-dropped", ARCH_PROBE,
      'suffix = "a" if flags & FLAG_ARCH_SPECIFIC else "f" if flags & FLAG_FAMILY_SPECIFIC else ""',
      'suffix = ""',
      "sm_90a/sm_100f cubins read as sm_90/sm_100: an image claims GPUs its arch-specific code does not run on"),
    M("archs-kinds-swapped", ARCH_PROBE,
      '(sass if kind == KIND_ELF else ptx).add(name)',
      '(ptx if kind == KIND_ELF else sass).add(name)',
      "SASS and PTX swapped: JIT-only architectures reported as native code and the reverse"),
    M("archs-sorted-as-text", ARCH_PROBE,
      "return sorted(set(names), key=arch_key)",
      "return sorted(set(names))",
      "architectures sorted as text (sm_100 before sm_75)"),
    M("archs-no-entry-bound", ARCH_PROBE,
      "            steps += 1\n            if steps > limit:\n",
      "            steps += 1\n            if False:\n",
      "a fatbin with a huge number of entries is read without end (no bound)"),
    M("archs-padding-unbounded", ARCH_PROBE,
      "            if padding > MAX_PADDING:\n",
      "            if False:\n",
      "a section of zero bytes is stepped through 8 bytes at a time to its end (a probe that takes minutes)"),
    M("archs-every-package-everywhere", ARCH_PROBE,
      "        for relative in shared_objects(root, (package,)):\n",
      "        for relative in shared_objects(root):\n",
      "a package is read in a site-packages it is not imported from (a stale copy's architectures reported)"),
    M("archs-zero-step", ARCH_PROBE,
      "            if entry_header_size < ENTRY_FIELDS_END:\n",
      "            if entry_header_size < 0:\n",
      "an entry header size of 0 never moves the reader forward: the probe hangs on a hostile file"),
    M("archs-overrun-accepted", ARCH_PROBE,
      "            if following > container_end:\n",
      "            if False:\n",
      "an entry that runs past its container is read anyway: the next 'entry' is payload bytes"),
    # --- tags and aliases: planning/tags.py -----------------------------------------------------------
    M("tags-latest-textual", TAGS,
      "top = max((c.torch for c, _ in slots), key=version_key, default=None)",
      "top = max((c.torch for c, _ in slots), default=None)",
      "`latest` goes to the textually greatest torch (2.9 above 2.14)"),
    M("tags-minor-alias-textual", TAGS,
      "version_key(combination.torch) > version_key(slots[newest[key]][0].torch)",
      "combination.torch > slots[newest[key]][0].torch",
      "a minor alias (2.7-...) goes to the textually greatest patch (2.7.9 above 2.7.10)"),
    M("tags-latest-any-variant", TAGS,
      " and combination.variant == release.pypi_default and not suffixes[i]",
      " and not suffixes[i]",
      "`latest` given to every CUDA build of the newest torch, not only its default"),
    M("tags-latest-suffixed", TAGS,
      " and combination.variant == release.pypi_default and not suffixes[i]",
      " and combination.variant == release.pypi_default",
      "`latest` given to a suffixed (non-default OS/Python) variant too"),
    M("tags-latest-devel", TAGS,
      '            if flavor == "runtime":\n',
      "            if True:\n",
      "plain `latest` given to devel as well as runtime"),
    M("tags-no-cudnn", TAGS,
      'return f"{torch}-cuda{combination.cuda}-cudnn{combination.cudnn_major}"',
      'return f"{torch}-cuda{combination.cuda}"',
      "the cuDNN major dropped from the tag"),
    M("tags-python-suffix", TAGS,
      "if combination.python != combination.os.python:",
      "if False:",
      "a Python other than the OS's gets no -py suffix",
      reviewed="the resolver refuses any Python other than the OS's (resolve._python), so the condition is "
      "never true for a resolved combination: no tag can change"),
    M("tags-suffix-on-default", TAGS,
      "    if not _is_default(kb, combination):\n",
      "    if _is_default(kb, combination):\n",
      "the OS suffix goes on the default variant instead of the others"),
    M("tags-suffix-always", TAGS,
      "if len(variants[(c.torch, c.variant, flavor)]) > 1",
      "if len(variants[(c.torch, c.variant, flavor)]) >= 1",
      "a suffix on every tag, even where one torch/CUDA pair has one variant (pytorch/pytorch's tags change)"),
    M("tags-clash-of-two", TAGS,
      "        if len(holders) > 1:\n",
      "        if len(holders) > 2:\n",
      "two images sharing a tag or alias not refused"),
    M("tags-alias-no-suffix", TAGS,
      'aliases[i].append(f"{base_tag(slots[i][0], minor)}-{flavor}{suffix}")',
      'aliases[i].append(f"{base_tag(slots[i][0], minor)}-{flavor}")',
      "a suffixed variant's minor alias loses its suffix (two variants claim one alias)"),
    # --- the resolver's refusals: planning/resolve.py -------------------------------------------------
    M("resolve-pinned-prefix", RESOLVE,
      'not shipped.startswith(given + ".")',
      "not shipped.startswith(given)",
      "a restated cuDNN/NCCL accepted on a text prefix of the wheel's pin (cudnn 9.1 for 9.10.2.21)"),
    M("resolve-pinned-cpu", RESOLVE,
      "    if shipped is None:\n        check.error(",
      "    if shipped is None:\n        return\n        check.error(",
      "a cuDNN/NCCL restated for a build that has none (cpu) accepted"),
    M("resolve-python-from-os", RESOLVE,
      "    if python not in release.python:\n",
      "    if python not in release.python and python != os.python:\n",
      "a Python accepted because the OS provides it, though no torch wheel exists for it"),
    M("resolve-python-not-os", RESOLVE,
      "    if python != os.python:\n",
      "    if False:\n",
      "a Python the OS does not provide accepted (the image would have no such interpreter)"),
    M("resolve-unpublished-patch", RESOLVE,
      "    if torch not in release.patches:\n",
      "    if False:\n",
      "a torch patch that was never published accepted"),
    M("resolve-wrong-companion", RESOLVE,
      "    if given and given != paired:\n",
      "    if False:\n",
      "a torchvision/torchaudio that does not pair with the torch accepted"),
    M("resolve-none-ignored", RESOLVE,
      "    if given == NONE:\n        return None\n",
      "    if given == NONE:\n        return paired\n",
      "`torchvision: none` ignored: the companion is installed anyway"),
    M("resolve-pin-plain", RESOLVE,
      '        return f"=={version}+{variant}"\n',
      '        return f"=={version}"\n',
      "a non-default variant pinned without its local label (pip may take another build)"),
    M("resolve-pin-no-exclusions", RESOLVE,
      'return ",".join([f"=={version}", *(f"!={version}+{other}" for other in others)])',
      'return f"=={version}"',
      "the default variant's pin no longer refuses other builds (a local +cpu wheel would win)"),
    M("resolve-torchaudio-plain", RESOLVE,
      'else f"=={torchaudio}+{variant}"',
      'else f"=={torchaudio}"',
      "torchaudio from an older line pinned plain: PyPI's 2.11.1+cu132 build lands in a cu130 image"),
    M("resolve-devel-no-toolkit-image", RESOLVE,
      "        if os.version not in facts.ubuntu:\n",
      "        if False:\n",
      "a devel image on an Ubuntu that has no nvidia/cuda toolkit image of that CUDA accepted"),
    M("resolve-default-os-any", RESOLVE,
      "        candidates = [o for o in candidates if o.version in kb.cuda[cuda].ubuntu]\n",
      "        pass\n",
      "the default OS chosen without a toolkit image for the CUDA"),
    M("resolve-errors-resolve", RESOLVE,
      "    if check.failed:\n        return Resolved(None, flavors, tuple(check.problems))\n",
      "",
      "a row with errors still resolves to a combination"),
    # --- the GPU architectures an image holds: building/architectures.py ---------------------------------
    M("archs-certain-only-noted", VERIFY_ARCHS,
      "        if fact.uncertain:\n",
      "        if True:\n",
      "a torch lacking an architecture its label promises is tagged (only a note)"),
    M("archs-no-libtorch-ptx", VERIFY_ARCHS,
      "    ptx = set(torch_flags.ptx) | set(dict(read).get(TORCH_LIBRARY, Archs(())).ptx)\n",
      "    ptx = set(torch_flags.ptx)\n",
      "torch's PTX in libtorch_cuda.so's fatbin is not read: a label with compute_120 never matches"),
    M("archs-companion-exact", VERIFY_ARCHS,
      "if not coverage(archs, Capability(a.major, a.minor)).runs]",
      "if a not in archs.sass]",
      "a torchvision that runs on sm_86 through its sm_80 cubin (or PTX) is said to lack sm_86"),
    M("archs-companions-unchecked", VERIFY_ARCHS,
      "    problems += _companions(torch, reading.files)\n",
      "",
      "a torchvision without code for an architecture torch serves is tagged ('no kernel image')"),
    M("archs-errors-ignored", VERIFY_ARCHS,
      'problems = [f"GPU architectures: could not read {shown(path)}: {shown(why)}" for path, why in reading.errors]',
      "problems: list[str] = []",
      "a file the probe could not read passes unverified"),
    M("archs-cuda-without-flags", VERIFY_ARCHS,
      "    if torch is None:\n        problems.append(",
      "    if torch is None:\n        return ArchVerdict()\n        problems.append(",
      "a CUDA image whose torch reports no architectures is tagged"),
    M("archs-cpu-with-gpu-code", VERIFY_ARCHS,
      "        if torch is not None or holding:\n",
      "        if False:\n",
      "a CPU build holding GPU code is tagged"),
    M("archs-bad-name-read", VERIFY_ARCHS,
      "        if found_kind != kind:\n",
      "        if False:\n",
      "a PTX name in a file's SASS list is read as SASS"),
    M("archs-not-probed", BUILDER,
      "        problems = self._check_archs(combination, image, reference, progress, measures)\n",
      "        problems: list[str] = []\n",
      "the builder tags an image whose GPU architectures were never read"),
    # --- the NVIDIA libraries torch loads: building/libraries.py -------------------------------------
    M("libraries-never-checked", LIBRARIES,
      'if expected.get("cuda") is None:\n        return []',
      "if True:\n        return []",
      "a CUDA image loading a system libnccl, or no libcublas at all, is tagged"),
    M("libraries-outside-venv", LIBRARIES,
      'if not copy.path.startswith(prefix.rstrip("/") + "/"):',
      "if False:",
      "a library loaded from /usr/lib or /usr/local/cuda is not said to lie outside the venv"),
    M("libraries-tag-version", LIBRARIES,
      "if promised and not _same_version(copy.version, promised):",
      "if False:",
      "a cuDNN or NCCL wheel of another version than the tag's passes whenever torch's pins are not read"),
    M("libraries-required", LIBRARIES,
      "        if name not in present:\n",
      "        if False:\n",
      "a CUDA image whose torch loaded no libcublas (or no library at all) is tagged"),
    M("libraries-one-copy", LIBRARIES,
      "if len({copy.path for copy in found}) > 1:",
      "if False:",
      "two copies of one library loaded (the wheel's and a system one) are not said to be two"),
    M("libraries-pins-ignored", LIBRARIES,
      "        if not ok:\n",
      "        if False:\n",
      "a cuBLAS wheel of another version than torch pins is accepted"),
    M("libraries-extras-ignored", LIBRARIES,
      'for e in {"", *extras}',
      'for e in {""}',
      "pins reached through an extra (cuda-toolkit[cublas] for CUDA 13) are not followed"),
    M("libraries-unnamed-owner", LIBRARIES,
      "    if family and not named:\n",
      "    if False:\n",
      "a libcublas vendored by a distribution torch does not require passes"),
    M("builder-skip-libraries", BUILDER,
      "*verify.check_libraries(expected, found), *pins.drifts]",
      "*pins.drifts]",
      "an image whose torch loads a library other than the pinned wheel's is tagged"),
    # --- derived images keep the promise: building/constraints.py --------------------------------------
    M("constraints-never-checked", CONSTRAINTS,
      "if pin.name not in installed or not _keeps(pin, installed[pin.name])",
      "if False",
      "an image that replaced a pinned torch or nvidia-* wheel passes"),
    M("constraints-missing-ignored", CONSTRAINTS,
      "if pin.name not in installed or not _keeps(pin, installed[pin.name])",
      "if pin.name in installed and not _keeps(pin, installed[pin.name])",
      "an image that uninstalled a pinned distribution passes"),
    M("constraints-local-label-ignored", CONSTRAINTS,
      'SpecifierSet(f"=={pin.version}")',
      'SpecifierSet(f"=={pin.version.split(\'+\')[0]}")',
      "torch 2.7.0+cpu replacing 2.7.0+cu118 passes"),
    M("constraints-foreign-file-checked", CONSTRAINTS,
      "    if not found.ours:\n",
      "    if False:\n",
      "a constraints file torchimages did not write (NGC's, a user's) fails an image"),
    M("constraints-no-file-fails", CONSTRAINTS,
      """    if answer.get("missing"):\n        return ConstraintsVerdict(\n            False,""",
      """    if answer.get("missing"):\n        return ConstraintsVerdict(\n            True,""",
      "an image without the file (an older one, a foreign one) is not said to be unchecked"),
    M("builder-skip-constraints", BUILDER,
      "*verify.check_libraries(expected, found), *pins.drifts]",
      "*verify.check_libraries(expected, found)]",
      "an image that no longer has its pinned distributions is tagged"),
    # --- the builder's admission: building/builder.py -------------------------------------------------
    M("builder-ignore-mismatch", BUILDER,
      "        if mismatches:\n            return [str(m) for m in mismatches]\n",
      "",
      "an image whose versions differ from its tag's is tagged"),
    M("builder-ignore-budget", BUILDER,
      "        if over:\n            return over\n",
      "",
      "an image over its size budget is tagged"),
    M("readings-max-layer-strict", READINGS,
      "    if largest.size <= image.max_layer:\n",
      "    if largest.size < image.max_layer:\n",
      "an image whose largest layer equals its max_layer is refused"),
    M("readings-max-layer-ignored", READINGS,
      "    if largest.size <= image.max_layer:\n",
      "    if True:\n",
      "an image whose largest layer is over its max_layer is tagged"),
    M("combination-no-default-max-layer", COMBINATION,
      "    return DEFAULT_MAX_LAYER if int(combination.cuda.split(\".\")[0]) >= 13 else OLDER_CUDA_MAX_LAYER\n",
      "    return OLDER_CUDA_MAX_LAYER\n",
      "a CUDA 13 runtime gets the older lines' 2.5 GB max_layer instead of 1.5 GB"),
    M("render-nvidia-prefix-match", VENV_STEP,
      'echo "^nvidia[-_.](${1// /|})([-_.]cu[0-9]+)?=="',
      'echo "^nvidia[-_.](${1// /|})"',
      "a family's group takes another family whose name it begins (cusparse takes cusparselt)"),
    M("render-nvidia-rest-forgets-groups", RENDER,
      'NvidiaGroup("other libraries (every other nvidia-* pin)", every, rest=True)',
      'NvidiaGroup("other libraries (every other nvidia-* pin)", group, rest=True)',
      "the last nvidia-* layer installs a pin an earlier layer installed too"),
    M("venv-step-rest-keeps-groups", VENV_STEP,
      """        | { grep -viE "$pattern" || [ $? = 1 ]; } \\""",
      """        | { grep -iE '^nvidia' || [ $? = 1 ]; } \\""",
      "the last nvidia-* layer installs every pin again"),
    M("render-devel-labels-inherited-ignored", RENDER,
      "wanted = {k: v for k, v in labels.items() if inherited is None or inherited.get(k) != v}",
      "wanted = {k: v for k, v in labels.items() if inherited is None}",
      "devel on runtime writes none of its own labels: it keeps runtime's flavor, title and input digest"),
    M("render-steps-not-stale", RENDER,
      'return sorted([*images.glob("*/Dockerfile"), *images.glob(f"*/{STEPS_FOLDER}/*")])',
      'return sorted(images.glob("*/Dockerfile"))',
      "a step script no longer rendered stays in images/ and render --check does not say so"),
    M("venv-step-clamp-forgotten", COMMON_STEP,
      "    clamp /opt/venv /home/torch\n}",
      "}",
      "a venv step's files keep the build's times: two builds of the same inputs differ"),
    M("builder-skip-gate", BUILDER,
      "return self.smoke_gate(combination, image, reference, found) if self.smoke_gate else []",
      "return []",
      "the smoke gate never runs"),
    M("builder-unreadable-facts", BUILDER,
      'return [f"could not read the versions inside the image: {exc}"]',
      "return []",
      "an image whose versions cannot be read is tagged"),
    M("builder-gate-after-interrupt", BUILDER,
      '        if self.cancelled.is_set():\n            return ["interrupted before the smoke gate"]\n',
      "",
      "the smoke gate starts after an interrupt"),
    M("builder-failed-gate-on-interrupt", BUILDER,
      "        if self.cancelled.is_set():  # a gate stopped by the interrupt fails: that is no verdict\n",
      "        if False:\n",
      "a gate stopped by the interrupt reports `failed`, not `interrupted`"),
    M("builder-tag-after-interrupt", BUILDER,
      "        if self.cancelled.is_set():  # never tag after an interrupt\n",
      "        if False:\n",
      "an image is tagged after an interrupt"),
    M("builder-tag-despite-problems", BUILDER,
      '        if problems:\n            return self._finish(combination, image, "failed", start, _listed("not tagged"',
      '        if False:\n            return self._finish(combination, image, "failed", start, _listed("not tagged"',
      "an image that failed verification or the gate is tagged"),
    M("builder-no-clash-refusal", BUILDER,
      "        Refuses (InputError) before any build when two images would share a public name.\n"
      '        """\n        clashes = shared_names(selected)\n        if clashes:\n',
      "        Refuses (InputError) before any build when two images would share a public name.\n"
      '        """\n        clashes = shared_names(selected)\n        if False:\n',
      "two images sharing a public name are built (the later overwrites the other's tag)"),
    M("builder-up-to-date-any", BUILDER,
      "return labels is not None and labels.get(INPUT_DIGEST_LABEL) == image.input_digest",
      "return labels is not None",
      "any image under the tag counts as up to date, whatever its inputs"),
    M("builder-interrupted-build-verified", BUILDER,
      '                if self.cancelled.is_set():\n'
      '                    return self._interrupted(combination, image, start, "during the build"',
      '                if False:\n'
      '                    return self._interrupted(combination, image, start, "during the build"',
      "a build stopped by the interrupt is judged as a build (failed, or verified and tagged)"),
    M("builder-exit-1-ok", BUILDER,
      "            if status:\n",
      "            if status > 1:\n",
      "a build that exited 1 goes on to verification"),
    M("builder-promote-other-image", REFERENCES,
      "if baked.ids and not known.intersection(baked.ids):",
      "if False:",
      "promote admits an image that is not the one its builder reported"),
    M("builder-promote-not-temporary", BUILDER,
      "        if not is_temporary(baked.reference):\n",
      "        if False:\n",
      "promote admits (and then removes) a reference that is not a temporary one"),
    M("builder-keep-temporary", BUILDER,
      "            self._remove_temporary(image, reference, progress)\n",
      "            pass\n",
      "the temporary reference outlives the build"),
    M("builder-never-push", BUILDER,
      "        if not self.options.push:\n            return []\n",
      "        return []\n",
      "--push does not push the verified image"),
    M("builder-engine-error-not-interrupt", BUILDER,
      '        if self.cancelled.is_set():\n'
      '            return self._interrupted(combination, image, start, f"during an engine action',
      '        if False:\n'
      '            return self._interrupted(combination, image, start, f"during an engine action',
      "an engine error caused by the interrupt reports `failed`, not `interrupted`"),
    # --- the smoke gate: smoke/runner.py, plugin.py, suites/test_multi_gpu.py --------------------------
    M("gate-no-tests-pass", RUNNER,
      "        if result.returncode == 0:\n",
      "        if result.returncode in (0, 5):\n",
      "the gate passes when pytest ran no test (exit 5)"),
    M("gate-no-failed-line-pass", RUNNER,
      "        if result.returncode == 0:\n",
      '        if result.returncode == 0 or "FAILED" not in result.stdout + result.stderr:\n',
      "the gate passes when pytest crashed without a FAILED line"),
    M("gate-drop-require-gpu", RUNNER,
      '    if options.require_gpu:\n        cmd.append("--require-gpu")\n',
      "",
      "--require-gpu is not handed to the suites: no usable GPU becomes a skip"),
    M("gate-facts-reused-with-gpus", RUNNER,
      "reused = None if gpus or facts is None else facts.raw",
      "reused = None if facts is None else facts.raw",
      "the GPU-less facts of verification reused in a container with GPUs (GPU tests see no GPU, skip)"),
    M("gate-container-left", RUNNER,
      "        with stopping.held():  # a second signal does not cut the removal short\n"
      "            engine.remove_container(name)\n",
      "        pass\n",
      "the smoke container outlives the run"),
    M("gate-gpus-all-unless-none", RUNNER,
      '    return gpus == "all"\n',
      '    return gpus != "none"\n',
      "`--gpus` other than all/none/auto asks for GPUs",
      reviewed="--gpus is parsed with choices all/none/auto (cli) and `auto` returns earlier, so the two "
      "conditions agree on every value that reaches here"),
    M("gate-require-gpu-skips", PLUGIN,
      "        if require_gpu:\n            pytest.fail(",
      "        if False:\n            pytest.fail(",
      "--require-gpu with no usable GPU turns into a skip"),
    M("gate-fewer-ranks", MULTI_GPU,
      'assert len(payload["ranks"]) == payload["world_size"], (',
      'assert len(payload["ranks"]) <= payload["world_size"], (',
      "an NCCL run with fewer ranks reporting than its world size passes"),
    M("gate-world-size-unchecked", MULTI_GPU,
      "assert world == gpu.device_count and indices == list(range(world)), (",
      "assert indices == list(range(world)), (",
      "an NCCL run whose world size does not follow the visible GPUs passes"),
    # --- push retries: engine/push.py -----------------------------------------------------------------
    M("push-permanent-with-transient-word", PUSH,
      "return bool(_TRANSIENT.search(error)) and not _PERMANENT.search(error)",
      "return bool(_TRANSIENT.search(error))",
      "a permanent error that mentions a transient word (denied ... timeout) is retried"),
    M("push-any-transient", PUSH,
      "not all(map(transient, errors))",
      "not any(map(transient, errors))",
      "an attempt returning a transient and a permanent error together is retried"),
    M("push-no-backoff", PUSH,
      "delay = backoff_s * 2 ** (n - 1)",
      "delay = backoff_s",
      "retries do not back off exponentially"),
    M("push-extra-try", PUSH,
      "if not errors or n == tries or not all(",
      "if not errors or not all(",
      "a retry is announced and waited for after the last try"),
    M("push-engine-error-raised", PUSH,
      "            errors = [str(exc)]\n",
      "            raise\n",
      "an engine error during a push escapes instead of being retried or reported"),
    M("push-unknown-transient", PUSH,
      r'r"denied|unauthori[sz]ed|authentication required|forbidden|\bunknown\b|not found"',
      r'r"denied|unauthori[sz]ed|authentication required|forbidden|not found"',
      "an `unknown` (manifest/blob unknown) error that also says timeout is retried"),
    M("push-502-permanent", PUSH,
      r"\b50[0234]\b",
      r"\b50[034]\b",
      "a 502 from the registry is not retried"),
    # --- devel on its runtime (issue 19): building/builder.py ---------------------------------------------
    M("devel-not-on-runtime", BUILDER,
      "                runtime = image_context(base) if base else None\n",
      "                runtime = None\n",
      "devel builds its own runtime stage again instead of starting from the runtime image just built"),
    M("devel-base-unchecked", BUILDER,
      "        if not base or combination.devel_from != RUNTIME_STAGE:\n",
      "        if True:\n",
      "a devel image not built on its runtime (runtime's layers not its first) is tagged"),
    M("devel-before-runtime", BUILDER,
      "            for image in sorted(images, key=lambda i: i is not runtime):\n",
      "            for image in sorted(images, key=lambda i: i is runtime):\n",
      "devel is built before the runtime image it is to start from"),
    # --- zstd pushes: engine/zstd_push.py ---------------------------------------------------------------
    M("zstd-config-unchecked", ZSTD,
      "    if config_digest != verified.id:\n",
      "    if False:\n",
      "a saved image whose configuration is not the verified image's is uploaded"),
    M("zstd-layers-unchecked", ZSTD,
      "    if tuple(diff_ids) != verified.layers:\n",
      "    if False:\n",
      "saved layers that are not the verified diff_ids are uploaded"),
    M("zstd-digest-unchecked", ZSTD,
      "    if pushed != layout.manifest_digest:\n",
      "    if False:\n",
      "an upload whose manifest the registry holds otherwise is taken as pushed"),
    M("zstd-images-mixed", ZSTD,
      "    if len(ids) != 1:\n",
      "    if not ids:\n",
      "tags of two different images are pushed as one"),
    M("zstd-digests-not-preserved", ZSTD,
      '"--preserve-digests", ',
      "",
      "skopeo may change the image on its way to the registry"),
    # --- platforms (issue 20): platforms.py, planning/platform_wheels.py, resolve, digests, admission ---------
    M("platforms-twice", PLATFORMS,
      "    if twice:\n",
      "    if False:\n",
      "a platform listed twice is accepted (two images under one platform's tag)"),
    M("platforms-unknown", PLATFORMS,
      "        if text not in PLATFORMS:\n",
      "        if False:\n",
      "an unknown platform (arm64, linux/riscv64) is accepted"),
    M("platforms-empty", PLATFORMS,
      "    if not texts:\n",
      "    if False:\n",
      "an empty platform list is accepted: a combination with no image"),
    M("wheels-never-missing", PLATFORM_WHEELS,
      "    if builds is None or variant in builds:\n",
      "    if True:\n",
      "a platform with no torch wheels of the build is accepted"),
    M("wheels-nearest-oldest-patch", PLATFORM_WHEELS,
      "other.patches[-1]",
      "other.patches[0]",
      "the nearest torch suggested is an old patch of its line, not its newest"),
    M("resolve-platform-missing-accepted", RESOLVE,
      'check.error("platforms", gap.message, gap.allowed, gap.suggestion)',
      "pass",
      "a combination with no torch wheels for a platform resolves"),
    M("resolve-platform-uncertain-silent", RESOLVE,
      "            if wheel.uncertain:\n",
      "            if False:\n",
      "a platform's wheels the knowledge base holds as uncertain are not warned about"),
    M("digest-platform-always", COMBINATION,
      "    if platform != platform_names.DEFAULT:\n        inputs |=",
      "    if True:\n        inputs |=",
      "every linux/amd64 image's input digest moves (the platform always hashed)"),
    M("digest-platform-never", COMBINATION,
      "    if platform != platform_names.DEFAULT:\n        inputs |=",
      "    if False:\n        inputs |=",
      "a linux/arm64 image has its linux/amd64 image's input digest"),
    M("digest-platform-index", COMBINATION,
      '            "index_url": combination.index_url_for(platform),\n',
      "",
      "a linux/arm64 image's wheel index is no input of its digest"),
    M("platform-tag-always", COMBINATION,
      'if combination.multi_platform else ""',
      'if True else ""',
      "a linux/amd64-only image gets a -amd64 local tag: today's references change"),
    M("tags-platform-tag-unchecked", TAGS,
      "(naming.tag, *naming.aliases, *naming.platform_tags)",
      "(naming.tag, *naming.aliases)",
      "a platform's local tag that another image has as its tag is not refused"),
    M("unsupported-platforms-admitted", REQUESTS,
      "        if not s.combination.multi_platform:\n            continue\n",
      "        continue\n",
      "a command that handles linux/amd64 alone (lock) starts on a selection built for linux/arm64 too"),
    M("arm64-venv-amd64-index", REQUESTS,
      "served.uv_toml(combination.index_url_for(platform))",
      "served.uv_toml(combination.index_url)",
      "a linux/arm64 build's venv installs from the linux/amd64 wheel index (no arm64 CUDA wheels there)"),
    M("check-platforms-ignored", CLI_COMMON,
      "    refused = unsupported(chosen, command, suggestion)\n    if refused:\n",
      "    refused = unsupported(chosen, command, suggestion)\n    if False:\n",
      "lock starts on a selection built for linux/arm64 (its packages read from images it cannot run)"),
    M("platforms-machine-wrong", PLATFORMS,
      '"aarch64": ARM64, "arm64": ARM64',
      '"aarch64": AMD64, "arm64": ARM64',
      "an aarch64 machine is taken to run linux/amd64 natively: no emulation asked of it"),
    # --- the doctor's machine and emulation checks (issue 20): doctor/checks.py, model.py, facts.py -------------
    M("doctor-large-pages-silent", DOCTOR_CHECKS,
      "    if facts.page_size > SMALL_PAGE:\n",
      "    if False:\n",
      "a 64 KiB-page machine (a GH200's kernel) passes without the warning"),
    M("doctor-emulation-unmounted", DOCTOR_CHECKS,
      "    if not facts.binfmt_mounted:\n",
      "    if False:\n",
      "binfmt_misc not mounted is not said (the handlers read as merely missing)"),
    M("doctor-emulation-disabled", DOCTOR_CHECKS,
      "        elif not handler.enabled:\n",
      "        elif False:\n",
      "a disabled qemu handler passes"),
    M("doctor-emulation-no-f", DOCTOR_CHECKS,
      '        elif "F" not in handler.flags:\n',
      "        elif False:\n",
      "a qemu handler without F passes: containers, which do not hold its interpreter, cannot use it"),
    M("doctor-emulation-old-qemu", DOCTOR_CHECKS,
      "    if old:\n",
      "    if False:\n",
      "bookworm's QEMU 7.2 (a known crash class) passes without the warning"),
    M("doctor-foreign-none", DOCTOR_MODEL,
      "return tuple(p for p in self.platforms if p != platform_names.of_machine(machine))",
      "return ()",
      "linux/arm64 images on x86_64 are 'not needed' emulation"),
    M("doctor-handler-named-by-arch", DOCTOR_MODEL,
      'return f"qemu-{platform_names.wheel_machine(platform)}"',
      'return f"qemu-{platform_names.arch(platform)}"',
      "the handler looked for is qemu-arm64, a name Debian never registers"),
    M("doctor-qemu-link-asked", DOCTOR_FACTS,
      "    real = os.path.realpath(interpreter)\n",
      "    real = interpreter\n",
      "the -binfmt-P link is asked for the version, which it refuses outside binfmt_misc"),
    # --- GPU architectures (issue 33): the doctor's check, its facts and needs; the GPU suite's decision -------
    M("doctor-archs-no-kernel-passes", DOCTOR_CHECKS,
      'status, phrase = FAIL, "no kernel image"',
      'status, phrase = OK, "no kernel image"',
      "a GPU no selected image has code for (an RTX 5090 under a cu126 image) passes"),
    M("doctor-archs-ptx-jit-under-compat", DOCTOR_CHECKS,
      'elif found.how == "ptx" and driver and image.toolkit_driver and driver_is_older(driver, image.toolkit_driver):',
      "elif False:",
      "PTX alone passes as a warning under minor-version compatibility, where the driver cannot JIT-compile it"),
    M("doctor-archs-ptx-silent", DOCTOR_CHECKS,
      'status, phrase = WARN, f"only PTX ({found.by}), {PTX_JIT},"',
      'status, phrase = OK, f"only PTX ({found.by}), {PTX_JIT},"',
      "PTX alone passes without the warning of the JIT at first use"),
    M("doctor-archs-uncertain-trusted", DOCTOR_CHECKS,
      'return (WARN, f"{phrase} {NOT_VERIFIED}") if image.archs_uncertain else (status, phrase)',
      "return (status, phrase)",
      "a list the knowledge base holds as uncertain passes (or fails) as if verified"),
    M("doctor-archs-foreign-images", DOCTOR_CHECKS,
      "images = [i for i in cuda if native is None or i.platform == native]",
      "images = list(cuda)",
      "linux/arm64 images' lists are held against an x86_64 machine's GPUs, which never run them"),
    M("doctor-archs-guessed-alternative", DOCTOR_CHECKS,
      "if _checked(i) and not i.archs_uncertain and _runs_on(i, capability, driver)[0] != FAIL",
      "if _checked(i) and _runs_on(i, capability, driver)[0] != FAIL",
      "an image whose list is only a guess is named as one that runs on the GPU"),
    M("doctor-smi-na-capability-fails", DOCTOR_FACTS,
      "        except ArchError:\n            known = None\n",
      '        except ArchError:\n            return (), "no capability"\n',
      "a GPU whose compute_cap is [N/A] loses the whole list, not just its own capability"),
    M("doctor-smi-stopped-unsaid", DOCTOR_FACTS,
      "    if result.stopped:\n",
      "    if False:\n",
      "an nvidia-smi that hangs or floods is reported by its exit status, not as stopped at its bound"),
    M("doctor-floor-not-the-label", DOCTOR_SELECTION,
      "        combination.min_driver,\n",
      "        combination.toolkit_driver,\n",
      "the driver check's floor is the toolkit's own driver, not io.torchimages.cuda.min-driver"),
    M("doctor-archs-of-default-platform", DOCTOR_SELECTION,
      "fact = combination.archs_for(image.platform)",
      'fact = combination.archs_for("linux/amd64")',
      "a linux/arm64 image is given the linux/amd64 build's architectures"),
    M("gpu-archs-ptx-refused", GPU_ARCHS,
      "if not archs.coverage(parsed, device.capability).runs",
      'if archs.coverage(parsed, device.capability).how != "sass"',
      "the GPU suite fails a GPU that runs the image's PTX (the driver compiles it)"),
    M("gpu-archs-nothing-refused", GPU_ARCHS,
      "if not archs.coverage(parsed, device.capability).runs",
      "if False",
      "the GPU suite passes a GPU that no architecture of the list runs on"),
    M("gpu-suite-label-ignored", GPU_SUITE,
      "label = spec.labels.get(ARCHS_LABEL)",
      "label = None",
      "the GPU suite never holds the label io.torchimages.cuda.archs to the visible GPUs"),
    # --- the release gate's secrets check: security/layers.py -------------------------------------------
    M("layers-deletion-unsaid", LAYERS,
      "if path in layer.deleted or any(a in layer.deleted or a in layer.opaque for a in ancestors):",
      "if path in layer.deleted:",
      "a file whose folder a later layer deletes (or makes opaque) is said to be in the final filesystem"),
    M("layers-whiteout-a-file", LAYERS,
      "        if base.startswith(WHITEOUT):\n",
      "        if False:\n",
      "a whiteout is a stray file, and a deletion above goes unsaid"),
    M("layers-mark-ignored", LAYERS,
      "(rule.mark is None or facts.marked)",
      "True",
      "an .npmrc or pip.conf without a credential is a finding (the default images fail)"),
    M("layers-secret-by-size", CONTENT,
      "                if secret.sha256 == digest:\n",
      "                if True:\n",
      "any file as large as a build secret is that secret"),
    M("layers-empty-stub-stray", LAYERS,
      ' and not (entry.type == "0" and entry.size == 0)',
      "",
      "BuildKit's empty mount target /tmp/requirements.lock is a stray file (every default image fails)"),
    M("layers-hard-link-content-lost", LAYERS,
      "        if known is not None:\n",
      "        if False:\n",
      "a hard link to a key or a netrc of its layer, named innocently, holds it unseen"),
    M("tarstream-silent-end", TARSTREAM,
      '            raise TarError(f"entry {self.count} (at byte {self.header_at}): {exc}") from None\n',
      "            return None\n",
      "a header the reader refuses ends the layer silently: what follows it is never scanned, the layer clean"),
    M("tarstream-signed-checksum-refused", TARSTREAM,
      "if value is None or value not in checksums(block):",
      "if value is None or value != checksums(block)[0]:",
      "a header with the signed checksum Go accepts is refused: a layer the engine applies is not scanned"),
    M("content-no-overlap", CONTENT,
      "        self.tail = data[-self.overlap :]\n",
      '        self.tail = b""\n',
      "a key or secret split between two chunks of a large file is missed"),
    M("leaks-test-keys-found", LEAKS,
      "if (packages or stdlib) and any(p in KEY_TEST_FOLDERS for p in parts[at + 1 : -1]):",
      "if False:",
      "the published test keys Python packages ship are private-key findings"),
    M("layers-blob-order", LAYERS,
      "read = [archive.layers.get(name) for name in order.names]",
      "read = [archive.layers.get(name) for name in sorted(order.names)]",
      "layers numbered in the order of their blobs' names, not manifest.json's"),
    # --- the release gate's own rules: builder, allowlist, gate, pip-audit's report, outdated ------------------
    M("gate-verdict-ignored", BUILDER,
      "            if verdict.problems:\n",
      "            if False:\n",
      "an image the security gate refuses is tagged and pushed"),
    M("allowlist-expiry-ignored", ALLOWLIST,
      "        return today > self.expires\n",
      "        return False\n",
      "an expired allowlist entry still lets its finding through, and fails nothing"),
    M("allowlist-any-image", ALLOWLIST,
      "        return not self.images or any(fnmatch.fnmatchcase(tag, glob) for glob in self.images)\n",
      "        return True\n",
      "an entry for some images allows its finding in every image"),
    M("allowlist-not-scanned-passes", ALLOWLIST,
      "    status = FAILED if failing else (PASSED if scan.scanned else NOT_SCANNED)\n",
      "    status = FAILED if failing else PASSED\n",
      "a check that could not look reads as passed"),
    M("gate-require-scan-ignored", GATE,
      "    if require_scan:\n",
      "    if False:\n",
      "--require-scan lets an unscanned image through"),
    M("audit-skips-are-clean", PYTHON_AUDIT,
      "    if skipped:\n",
      "    if False:\n",
      "pip-audit's skipped packages (its service did not answer) read as scanned and clean"),
    M("allowlist-expires-any-iso-form", ALLOWLIST,
      "        day = datetime.date.fromisoformat(text) if DAY.fullmatch(text) else None\n",
      "        day = datetime.date.fromisoformat(text)\n",
      "an allowlist entry's expires may be 20270131 or a week date, not YYYY-MM-DD alone"),
    M("allowlist-expires-no-horizon", ALLOWLIST,
      "    if day > latest:\n",
      "    if False:\n",
      "an allowlist entry may hold for years (no yearly review)"),
    M("builder-not-scanned-unsaid", BUILDER,
      "                progress.note(line)\n",
      "                pass\n",
      "build and promote pass a check that could not look in silence"),
    M("verify-bad-key-is-unverified", SIGNING,
      "        if result.returncode not in (NO_SIGNATURES, NO_IMAGE, NO_MATCHING) and said.startswith(BAD_KEY):\n",
      "        if False:\n",
      "a public key cosign cannot load reads as 'not verified' (exit 1), not bad input (exit 2)"),
    M("multi-node-world-of-one", MULTI_NODE,
      '    assert all(a["world_size"] == NODES for a in answers), answers\n',
      "",
      "two ranks each in a world of their own (size 1) pass the all_reduce across nodes"),
    M("outdated-base-unchecked", STALENESS,
      "    if not locked or locked == built_on:\n",
      "    if True:\n",
      "an image on a registry base whose locked digest moved is current"),
    M("staging-unchecked", STAGING,
      "        digest, problems = _checked(engine, repository, staged, wanted)\n",
      "        digest, _ = _checked(engine, repository, staged, wanted)\n",
      "an index the registry does not serve as checked gets the public tags"),
    M("staging-public-first", STAGING,
      'problems = engine.create_index(repository, [staged.rsplit(":", 1)[1]], sources, annotations)',
      "problems = engine.create_index(repository, list(names), sources, annotations)",
      "the index is written under the public tags before it is checked"),
    M("staging-no-move-back", STAGING,
      "            return [*problems, *_restored(engine, repository, moved, before)]\n",
      "            return problems\n",
      "a tag moved before a later refusal keeps naming the refused index"),
    M("staging-alias-first", STAGING,
      "    for name in names:\n        moved.append(name)\n",
      "    for name in reversed(names):\n        moved.append(name)\n",
      "an alias is moved before the public tag"),
    M("staging-sign-skipped", STAGING,
      "    if not problems and sign is not None:\n",
      "    if False:\n",
      "an index is made public without its signature"),
    M("staging-rewrites-the-same", STAGING,
      "        and set(before.values()) == {now}  # every name names one index already\n",
      "        and False\n",
      "a re-run over the images the public tags name already writes (and leaves) another temporary tag"),
    M("index-nested", INDEX,
      "    if not document.is_index:\n        return document.digest\n",
      "    if True:\n        return document.digest\n",
      "join writes an index inside the index for a platform image pushed as an index"),
    M("manifests-size-unchecked", MANIFESTS,
      "    if len(raw) != entry.size:\n",
      "    if False:\n",
      "an index whose entry's size is not its manifest's is made public"),
    M("manifests-digest-unchecked", MANIFESTS,
      "    if digest_of(raw) != entry.digest:\n",
      "    if False:\n",
      "an index entry whose manifest the registry serves as other bytes is made public"),
    M("join-exit-last-flavor", CLI_JOIN,
      "            failed = failed or bool(problems)\n",
      "            failed = bool(problems)\n",
      "join exits 0 when an earlier flavor's index failed and a later one's was written"),
    M("signed-without-digest-silent", SIGNATURES,
      '        return [f"{image.platform_reference}: {PUSHED_NOT_SIGNED} (the engine recorded no digest of it)"]\n',
      "        return []\n",
      "a pushed image with no recorded digest is reported as if signed"),
    M("engine-manifest-unbounded", DOCKER_ENGINE,
      "        if result.overflowed:\n            size = manifests.MAX_BYTES",
      "        if False:\n            size = manifests.MAX_BYTES",
      "a manifest of megabytes is taken (cut short) instead of refused"),
    M("builder-index-of-one-platform", BUILDER,
      "        elif missing:\n",
      "        elif False:\n",
      "build --push of one platform of two writes an index of that platform alone"),
    # --- bounds, escaping and signals: engine/process.py, registry.py, cli/entry.py, cli/__init__.py ---------
    M("output-endless-read-on", PROCESS,
      "    sinks = (_Sink(limit, full), _Sink(limit, full))\n",
      "    sinks = (_Sink(limit), _Sink(limit))\n",
      "a container whose output never ends (an endless file in the image) is read until its time limit"),
    M("registry-manifest-cut-hashed", REGISTRY,
      "    if len(body) > MAX_MANIFEST_BYTES:\n",
      "    if False:\n",
      "a manifest past its bound is hashed in part: a digest the registry never served"),
    M("outdated-reason-raw", OUTDATED,
      'print("\\n".join(shown(line) for line in found.lines())',
      'print("\\n".join(found.lines())',
      "a reason's newline (a registry's error) starts a line of its own in outdated's output"),
    M("streams-escape-nothing", ENTRY,
      '            self.stream.write(escaped(text, keep="\\n\\t"))\n',
      "            self.stream.write(text)\n",
      "an escape sequence in a file name reaches the terminal"),
    M("probe-container-left", DOCKER_ENGINE,
      "            self._remove_after_interrupt(name)\n            raise\n",
      "            raise\n",
      "a signal during a probe's `docker run` leaves its container behind"),
    M("signal-while-importing", CLI,
      "    early = stopping.install()\n",
      "    early: dict[int, stopping.Handler] = {}\n",
      "a signal while the command line's modules load is a traceback (or no line at all)"),
    # --- the knowledge base from the indexes: kb/, cli/kb.py ---------------------------------------------------
    M("kb-markers-ignored", KB_DERIVE,
      "        return bool(requirement.marker.evaluate(environment))\n",
      "        return True\n",
      "a pin for another platform (x86_64's NVIDIA pins) is read as an aarch64 wheel's: a CPU build becomes CUDA"),
    M("kb-loose-pin-read", KB_DERIVE,
      '    if len(specs) != 1 or specs[0].operator != "==" or not PIN.fullmatch(specs[0].version):\n',
      "    if len(specs) != 1:\n",
      "a range, a wildcard or arbitrary text (>=2.21, ==9.*, ===<text>) is written into compat.yaml as a pin"),
    M("kb-any-label-a-build", KB_DERIVE,
      "        return local if BUILD_LABEL.fullmatch(local) else None\n",
      "        return local\n",
      "a rocm or xpu wheel (+rocm6.2) is read as a build of compat.yaml's variants"),
    M("kb-oldest-patch-pins", KB_DERIVE,
      "        ordered = sorted(seen, key=lambda b: (version_key(b.version), b.source))\n",
      "        ordered = sorted(seen, key=lambda b: (version_key(b.version), b.source), reverse=True)\n",
      "a build's pins are its oldest patch's, not its newest's"),
    M("kb-toolkit-of-cu12", KB_DERIVE,
      '    return variant.startswith("cu") and variant[2:4].isdigit() and int(variant[2:4]) >= 13\n',
      '    return variant.startswith("cu")\n',
      "a cu12 build's cuda-toolkit pin is written as the toolkit its devel image takes nvcc from"),
    M("kb-changed-pin-unsaid", KB_DIFF,
      "        elif str(old) != value:\n",
      "        elif False:\n",
      "a pin the index serves differently is not reported (kb check passes a wrong knowledge base)"),
    M("kb-settled-disagrees", KB_DIFF,
      "DISAGREE = (NEW, CHANGED, ADDED)",
      "DISAGREE = (NEW, CHANGED, ADDED, SETTLED)",
      "kb check fails on a fact the index confirms (settling an uncertain fact is agreement)"),
    M("kb-older-minors-read", KB_DIFF,
      "        if version_key(minor) < oldest or (minor not in torch and not found[minor].variants):\n",
      "        if minor not in torch and not found[minor].variants:\n",
      "releases older than the knowledge base's concern are added to it"),
    M("kb-uncertain-kept", KB_WRITER,
      "            uncertain.remove(change.old)\n",
      "            pass\n",
      "a fact the index settled stays `uncertain` in the written file"),
    M("kb-body-unbounded", KB_INDEX,
      "            if size > limit:\n",
      "            if False:\n",
      "a page or metadata file past its bound is read whole (an index can exhaust memory)"),
    M("kb-lying-length-believed", KB_INDEX,
      "        if missing:\n",
      "        if False:\n",
      "an answer shorter than its Content-Length (a connection cut) is read as whole"),
    M("kb-deadline-cut-whole", KB_INDEX,
      "        if self.deadline.expired:  # the deadline shut the socket: what came is not the whole answer\n",
      "        if False:\n",
      "a trickle the deadline cut is said as a short answer, not as the deadline"),
    M("kb-redirect-anywhere", KB_INDEX,
      '    if urllib.parse.urlsplit(target).scheme not in ("http", "https") or not location.strip():\n',
      "    if not location.strip():\n",
      "a redirect to file: or ftp: is followed a step (only http and https are)"),
    M("kb-metadata-hash-unchecked", KB_SYNC,
      "    if link.metadata_sha256 and hashlib.sha256(body).hexdigest() != link.metadata_sha256:\n",
      "    if False:\n",
      "a metadata file whose sha256 is not the page's is read as the wheel's facts"),
    M("kb-metadata-of-another-wheel", KB_SYNC,
      "canonicalize_name(meta.name) != wheel.project or _version(meta.version) != _version(wheel.version)",
      "False",
      "a metadata file of another project or version is read as the wheel's facts"),
    M("kb-big-wheel-read", KB_SYNC,
      "MAX_WHEEL_BYTES = 64 * 1024\n",
      "MAX_WHEEL_BYTES = 1024 * 1024 * 1024\n",
      "a real wheel (hundreds of MiB) is downloaded where the index serves no .metadata file"),
    M("kb-notes-not-condensed", KB_SYNC,
      "    for miss in misses:\n        by.setdefault((miss.project, miss.reason), []).append(miss)\n",
      "    for miss in misses:\n        by.setdefault((miss.filename, miss.reason), []).append(miss)\n",
      "each wheel not read is a note of its own (a real PyPI run: twenty lines of URLs), not one per project"),
    M("kb-release-companions-miss-limit", KB_SYNC,
      "        limit = MAX_MISSES if release is None else None\n",
      "        limit = MAX_MISSES\n",
      "with --release, a companion's pair is never read behind MAX_MISSES newer versions without metadata"),
    M("kb-json-api-unasked", KB_SYNC,
      "                    if asking.json_api is None:\n",
      "                    if True:\n",
      "pypi.org's wheels without a metadata file are not read from PyPI's JSON API"),
    M("kb-json-api-any-file", KB_SYNC,
      "    if filename not in found.files:\n",
      "    if False:\n",
      "a JSON API answer that lists no such file is read as that wheel's metadata"),
    M("kb-json-api-header-injection", KB_PAGES,
      "        if isinstance(entry, str) and _one_line(entry) == entry.strip() and entry.strip():\n",
      "        if isinstance(entry, str) and entry.strip():\n",
      "a requires_dist string with a line break smuggles more headers into the metadata read"),
    M("kb-arm64-cpu-dropped", KB_DIFF,
      '    if "cpu" in arm and "cpu" not in facts.variants:',
      "    if False:",
      "a restored release loses PyPI's linux/arm64 cpu wheel (its x86_64 wheel is a CUDA build)"),
    M("kb-check-always-passes", CLI_KB,
      "        return EXIT_FAILED if disagrees else EXIT_OK\n",
      "        return EXIT_OK\n",
      "kb check exits 0 on a knowledge base that disagrees with the index"),
    M("kb-settling-index-pytorch-only", COMPAT,
      "        return PYPI_INDEX_URL if variant == release.pypi_default else self.index_url_template",
      "        return self.index_url_template",
      "validate names download.pytorch.org for an uncertain fact of PyPI's default build (PyPI settles it)"),
    M("kb-json-unsafe-url", KB_PAGES,
      '    return url if urllib.parse.urlsplit(url).scheme in ("http", "https") else None\n',
      "    return url\n",
      "a page's javascript: or file: link is kept as a file to fetch"),
    # --- issue 43: a test that fails for every rule (bootstrapped bases, staleness, layer scan, publishing,
    # probes) ----------------------------------------------------------------------------------------------
    M("bootstrap-any-digest-label", BOOTSTRAP,
      "    return labels is not None and labels.get(DIGEST_LABEL) == digest(\n",
      "    return labels is not None and bool(labels.get(DIGEST_LABEL)) or not digest(\n",
      "a base made by another command (another suite, mirror, keyring) is reused as up to date"),
    M("bootstrap-platform-digest-ignored", BOOTSTRAP,
      "        os, mirror, base.platform if base else platforms.DEFAULT\n",
      "        os, mirror, platforms.DEFAULT\n",
      "an arm64 base holding linux/amd64's root filesystem is taken as up to date"),
    M("bootstrap-amd64-tagged-as-any-platform", BOOTSTRAP,
      "    if base.platform == platforms.DEFAULT and name != archive.image and up_to_date(engine, os, mirror):\n",
      "    if name != archive.image and up_to_date(engine, os, mirror):\n",
      "the linux/amd64 base is tagged as the arm64 base: the arm64 image is built on x86_64 programs"),
    M("bootstrap-lock-digest-labelled", COMBINATION,
      '                labels[BASE_DIGEST_LABEL] = ""\n',
      "                pass\n",
      "an image built on a bootstrapped base says base.digest of the registry's image the lock pins"),
    M("bootstrap-first-platforms-context", REQUESTS,
      "*bootstrap.contexts(combination, image.platform)),",
      "*bootstrap.contexts(combination, combination.platforms[0])),",
      "the arm64 build of a two-platform combination is built on the linux/amd64 bootstrapped base"),
    M("stale-any-base-bootstrapped", STALENESS,
      "    if bootstrapped and base is not None and base.reference == combination.os.image:\n",
      "    if bootstrapped and base is not None:\n",
      "a devel image on an nvidia/cuda image the lock moved is called current under --bases bootstrap"),
    M("scan-overlap-default-only", CONTENT,
      "        self.overlap = max([MATCH_MAX, *(len(needle) for needle, _ in self.needles)])\n",
      "        self.overlap = MATCH_MAX\n",
      "a build secret longer than 16 KiB, copied into a file across a 1 MiB boundary, is not found"),
    M("scan-key-in-chunk-only", CONTENT,
      "            self.key = private_key(data, len(data) - self.overlap)\n",
      "            self.key = private_key(chunk, len(chunk) - self.overlap)\n",
      "a private key whose BEGIN line ends a chunk of a large file is not found"),
    M("scan-mark-in-chunk-only", CONTENT,
      "            self.marked = self.mark.search(data) is not None\n",
      "            self.marked = self.mark.search(chunk) is not None\n",
      "a credentials file's mark (an .npmrc's _authToken=) split between two chunks is not found"),
    M("staging-last-entry-only", STAGING,
      "            problems += documents.entry_problems(entry, engine.manifest(",
      "            problems = documents.entry_problems(entry, engine.manifest(",
      "an index whose first platform's manifest is gone or altered is made public (only the last entry counts)"),
    M("staging-cancel-ignored", STAGING,
      "    if not problems and cancelled is not None and cancelled.is_set():\n",
      "    if False:\n",
      "an interrupt after the checks still moves the public tags to the new index"),
    M("manifests-media-type-unchecked", MANIFESTS,
      "    if found.media_type != entry.media_type or found.is_index:\n",
      "    if found.is_index:\n",
      "an index whose entry says a Docker manifest where the registry serves an OCI one is made public"),
    M("probe-existing-folder-writable", PROBE_PLATFORM,
      '        with tempfile.NamedTemporaryFile(dir=path, prefix=".smoke-write-"):\n            pass\n',
      "        if not os.path.isdir(path):\n            raise NotADirectoryError(path)\n",
      "a read-only HOME or cache folder is reported writable: the platform suite passes an image that fails"),
    M("probe-elf-little-endian-only", FACTS_PROBE,
      '"little" if header[5] == 1 else "big"',
      '"little"',
      "a big-endian image's (ppc64, s390x) interpreter and libraries are said to be built for another machine"),
    M("probe-nvcc-not-executable", CUDA_EXTENSION_PROBE,
      "if os.access(path, os.X_OK)",
      "if os.path.exists(path)",
      "an nvcc that cannot run (CUDA_HOME's, not executable) is reported as the compiler found"),
)
# fmt: on

# Which unit test files concern a mutated module: those whose path matches the first pattern or whose text
# matches the second (found when the runner starts, so tests added later, in any file, are run too).
RELEVANT: dict[str, tuple[str, str]] = {
    VERIFY: (r"verif|smoke|companion|builder", r"\bverify\b|expected_facts|Builder\b"),
    VERSIONS: (r"verif|version|smoke|companion|builder", r"\bversions\b|\bverify\b|expected_facts|Builder\b"),
    TAGS: (r"tags|alias", r"\btags\b|aliases|latest"),
    RESOLVE: (r"resolve|matrix|blocks|companion|knowledge", r"\bresolve\b|variant_pin|problems_of"),
    BUILDER: (r"builder|cancel|admi|promot", r"\bbuilder\b|Builder\b"),
    REFERENCES: (r"builder|cancel|admi|promot", r"\bbuilder\b|Builder\b"),
    LIBRARIES: (r"librar|builder", r"check_libraries|library_answer"),
    CONSTRAINTS: (r"constraint|builder", r"check_constraints|constraints_answer"),
    VERIFY_ARCHS: (r"building/test_architectures", r"building\.architectures|building import architectures"),
    RUNNER: (r"smoke|gate|runner", r"\brunner\b|smoke_gate|run_suites"),
    PLUGIN: (r"smoke|plugin|gpu", r"\bplugin\b|require.gpu"),
    MULTI_GPU: (r"smoke|gpu|nccl", r"multi_gpu|world_size"),
    PUSH: (r"push|retr|engine", r"push_with_retries|\btransient\b"),
    ZSTD: (r"zstd|push", r"zstd_push"),
    PLATFORMS: (r"platform", r"\bplatforms\b"),
    PLATFORM_WHEELS: (r"platform", r"platform_wheels"),
    COMBINATION: (r"platform|render", r"input_digest|platform_tag"),
    REQUESTS: (r"platform|request|wheel", r"unsupported|check_platforms|wheel_secrets|build_request"),
    CLI_COMMON: (r"platform|lock", r"check_platforms|unsupported"),
    DOCTOR_CHECKS: (r"doctor", r"check_emulation|check_machine"),
    DOCTOR_MODEL: (r"doctor|platform", r"foreign_platforms|emulator"),
    DOCTOR_FACTS: (r"doctor", r"_binfmt|_qemu_version"),
    DOCTOR_SELECTION: (r"doctor", r"doctor\.needs"),
    GPU_ARCHS: (r"gpu_archs", r"smoke\.gpu_archs|gpu_archs\."),
    GPU_SUITE: (r"gpu_archs", r"ARCH_TESTS"),
    LAYERS: (r"security|layers", r"security\.layers|\blayers\.scan\b"),
    LEAKS: (r"security|layers", r"security\.layers|\blayers\.scan\b"),
    TARSTREAM: (r"security|layers|tarstream", r"security\.layers|\blayers\.scan\b|tarstream"),
    CONTENT: (r"security|layers", r"security\.layers|\blayers\.scan\b"),
    ALLOWLIST: (r"security", r"\ballowlist\b"),
    GATE: (r"security", r"security\.gate|security_gate"),
    PYTHON_AUDIT: (r"security", r"read_report|python\.scan"),
    STALENESS: (r"security", r"staleness"),
    SIGNING: (r"signing", r"\bsigning\b"),
    MULTI_NODE: (r"smoke|cluster", r"test_multi_node|check_all_reduce"),
    STAGING: (r"staging|platforms_build", r"\bstaging\b"),
    INDEX: (r"staging|platforms_build", r"\bindex\.join\b"),
    MANIFESTS: (r"staging|manifests", r"\bmanifests\b"),
    SIGNATURES: (r"signing|staging", r"sign_key|RecordingSigner"),
    CLI_JOIN: (r"staging", r'cli\("join"'),
    READINGS: (r"builder|max_layer", r"over_max_layer|max_layer"),
    RENDER: (r"render|nvidia_layers|blocks", r"nvidia_groups|NVIDIA_GROUPS"),
    VENV_STEP: (r"nvidia_layers|blocks|render", r"venv\.sh|nvidia_groups"),
    COMMON_STEP: (r"blocks|render", r"common\.sh|CLAMP"),
    PROCESS: (r"bounds|streamed|cancel", r"engine\.process|run_cancellable"),
    REGISTRY: (r"registry", r"resolve_digest|\bregistry\."),
    OUTDATED: (r"hostile_output|staleness", r"\boutdated\b"),
    ENTRY: (r"hostile_output|signals", r"cli\.entry"),
    DOCKER_ENGINE: (r"manifests|bounds|signals|shell", r"docker_engine|DockerEngine"),
    CLI: (r"signals", r"WHILE_IMPORTING"),
    ARCH_PROBE: (r"cuda_archs", r"cuda_archs"),
    KB_DERIVE: (r"^kb/", r"torchimages\.kb\b"),
    KB_DIFF: (r"^kb/", r"torchimages\.kb\b"),
    KB_INDEX: (r"^kb/", r"torchimages\.kb\b"),
    KB_SYNC: (r"^kb/", r"torchimages\.kb\b"),
    KB_WRITER: (r"^kb/", r"torchimages\.kb\b"),
    KB_PAGES: (r"^kb/", r"torchimages\.kb\b"),
    CLI_KB: (r"^kb/", r"torchimages\.kb\b"),
    COMPAT: (r"resolve|knowledge|compat", r"settled_by|settling_index|would settle"),
    BOOTSTRAP: (r"bootstrap", r"building\.bootstrap|import bootstrap"),
    PROBE_PLATFORM: (r"probe_platform", r"probe_source\(\"platform\"\)"),
    FACTS_PROBE: (r"probe_facts", r"probe_source\(\"facts\"\)"),
    CUDA_EXTENSION_PROBE: (r"probe_torch_scripts", r"probe_source\(\"cuda_extension\"\)"),
}


# Never run for a mutation: they check packaging, hostile input and hadolint, none of the rules above, take a
# third of the unit tests' time, and two of them hold a wall-clock limit that a busy machine can break.
EXCLUDED = re.compile(r"test_packaging\.py$|test_hostile_input\.py$")
DESELECT = "not hadolint"


def project_files(root: Path) -> list[Path]:
    """The files git knows or would add (tracked and untracked, not ignored), relative to root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    return [Path(p) for p in listed if p and ((root / p).is_file() or (root / p).is_symlink())]


def copy_tree(root: Path, into: Path) -> Path:
    for relative in project_files(root):
        target = into / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if (root / relative).is_symlink():  # kept a link (templates -> torchimages/templates)
            os.symlink(os.readlink(root / relative), target)
        else:
            shutil.copy2(root / relative, target)
    return into


def stale(mutation: Mutation, root: Path) -> str:
    """Why the row no longer applies (its text is not found exactly once), or ''."""
    path = root / PACKAGE / mutation.file
    if not path.is_file():
        return f"{mutation.file} does not exist"
    count = path.read_text().count(mutation.original)
    return "" if count == 1 else f"its original text is found {count} times in {mutation.file}"


def table_problems(wanted: list[Mutation]) -> list[str]:
    """What is wrong with the table against the code: a duplicate id, a file with no RELEVANT entry, a row whose
    text is not found exactly once, a row that changes nothing."""
    ids = [m.id for m in MUTATIONS]
    problems = [f"{i}: the id is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for m in wanted:
        if m.file not in RELEVANT:
            problems.append(f"{m.id}: {m.file} has no RELEVANT entry (which tests concern it)")
        if m.original == m.replacement:
            problems.append(f"{m.id}: its replacement is its original text")
        if why := stale(m, ROOT):
            problems.append(f"{m.id}: {why}")
    return problems


def relevant_tests(tree: Path, mutation: Mutation) -> list[str]:
    by_name, by_text = (re.compile(pattern) for pattern in RELEVANT[mutation.file])
    found = sorted(
        str(p.relative_to(tree))
        for p in (tree / "tests" / "unit").rglob("test_*.py")
        if not EXCLUDED.search(p.name)
        and (
            by_name.search(str(p.relative_to(tree / "tests" / "unit"))) or by_text.search(p.read_text(errors="replace"))
        )
    )
    return found or ["tests/unit"]


def pytest(tree: Path, tests: list[str], timeout: float) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("TORCHIMAGES_")}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "--no-header",
        "-k",
        DESELECT,
        *tests,
    ]
    try:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "timed out"
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, lines[-1] if lines else ""


@dataclass(frozen=True)
class Result:
    mutation: Mutation
    verdict: str  # killed | survived | reviewed | stale | error
    detail: str
    seconds: float


def run_one(tree: Path, mutation: Mutation, timeout: float) -> Result:
    start = time.monotonic()
    why = stale(mutation, tree)
    if why:
        return Result(mutation, "stale", why, 0.0)
    path = tree / PACKAGE / mutation.file
    original = path.read_text()
    path.write_text(original.replace(mutation.original, mutation.replacement, 1))
    try:
        code, last = pytest(tree, relevant_tests(tree, mutation), timeout)
    finally:
        path.write_text(original)
    seconds = time.monotonic() - start
    if code == 0:
        return Result(mutation, "reviewed" if mutation.reviewed else "survived", last, seconds)
    if code in (1, 2, 3, -1):  # failed, interrupted (collection error), internal error, timeout: killed
        return Result(mutation, "killed", last, seconds)
    return Result(mutation, "error", f"pytest exit {code}: {last}", seconds)


def check_isolation(tree: Path) -> None:
    """The copy's package is the one its tests import (not the working tree's editable install)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    where = subprocess.run(
        [sys.executable, "-c", "import torchimages; print(torchimages.__file__)"],
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(where).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"mutants: the copy imports {where}, not its own package: refusing to run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2, help="mutations tried at once, one tree copy each (2)")
    parser.add_argument("--only", default="", help="comma-separated mutation ids")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutation's tests (300)")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument(
        "--check", action="store_true", help="only check the table against the code (seconds; `make lint` runs it)"
    )
    args = parser.parse_args(argv)
    wanted = [m for m in MUTATIONS if not args.only or m.id in args.only.split(",")]
    if args.list:
        for m in wanted:
            print(f"{m.id:38} {m.file:32} {m.rule}" + (f"\n{'':38} reviewed: {m.reviewed}" if m.reviewed else ""))
        return 0
    rows_stale = table_problems(wanted)
    if rows_stale:
        print("mutants: stale rows (fix the table):\n  " + "\n  ".join(rows_stale))
        return 2
    if args.check:
        print(f"mutants: the {len(wanted)} rows match the code")
        return 0
    started = time.monotonic()
    results: list[Result] = []
    lock = threading.Lock()
    with tempfile.TemporaryDirectory(prefix="torchimages-mutants-") as tmp:
        trees = [copy_tree(ROOT, Path(tmp, f"tree{n}")) for n in range(max(1, args.jobs))]
        check_isolation(trees[0])
        code, last = pytest(trees[0], ["tests/unit"], args.timeout * 4)
        if code != 0:
            print(f"mutants: the unit tests fail without any mutation ({last}): fix them first")
            return 2
        free = list(trees)

        def job(mutation: Mutation) -> Result:
            with lock:
                tree = free.pop()
            try:
                result = run_one(tree, mutation, args.timeout)
            finally:
                with lock:
                    free.append(tree)
            with lock:
                print(f"{result.verdict:9} {result.seconds:5.1f} s  {mutation.id:38} {mutation.file}", flush=True)
            return result

        with ThreadPoolExecutor(len(trees)) as pool:
            results = list(pool.map(job, wanted))
    counts = {v: sum(r.verdict == v for r in results) for v in ("killed", "survived", "reviewed", "stale", "error")}
    print()
    for r in results:
        if r.verdict in ("survived", "stale", "error"):
            print(f"{r.verdict.upper()}: {r.mutation.id} ({r.mutation.file}): {r.mutation.rule}; {r.detail}")
        elif r.verdict == "reviewed":
            print(f"reviewed survivor: {r.mutation.id}: {r.mutation.reviewed}")
    total = ", ".join(f"{n} {v}" for v, n in counts.items() if n or v in ("killed", "survived"))
    print(f"\n{len(results)} mutations: {total} ({time.monotonic() - started:.0f} s)")
    if counts["stale"] or counts["error"]:
        return 2
    return 1 if counts["survived"] else 0


if __name__ == "__main__":
    sys.exit(main())
