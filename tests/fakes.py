"""One fake container engine for every unit test: the whole `Engine` protocol (torchimages/engine/types.py)
plus the `DockerEngine` methods the code calls beyond it, in memory, recording what it is asked.

What an image holds is never computed here: a test hands the fake the facts probe's answer (`probe_answer`,
the literal JSON the probe would print inside the image) and the fake prints it back. A rule broken in the
code under test therefore meets facts it did not write.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from torchimages.building.readings import INSTALLED_PROBE
from torchimages.building.references import TEMP_REPOSITORY
from torchimages.engine import (
    Attested,
    BuildRequest,
    CacheSpec,
    EngineError,
    HistoryEntry,
    ImageInfo,
    SbomAttestation,
    ShellResult,
    StoredLayers,
)
from torchimages.probes import END_MARK, MARK, PART_MARK, combined_source, probe_source, program_nonce
from torchimages.security.python import PACKAGES_PROBE

# The facts probe's answer (torchimages/probes/scripts/facts.py): what an image holds, as torch reports it.
Raw = dict[str, Any]
# The key of an image's truth that holds the archs probe's answer (probes/scripts/cuda_archs.py), not the facts
# probe's: `archs_answer`.
ARCHS_ANSWER = "cuda_archs_probe"
# What the archs probe says of an image with no GPU code (a CPU build).
NO_GPU_CODE: Raw = {"torch_flags": None, "files": {}, "errors": {}}
# The probes one run of verification holds, in their order (written here, not taken from the code under test).
COMBINED = ("facts", "cuda_archs")


def archs_answer(
    torch_flags: str | None, files: Mapping[str, tuple[str, str]] | None = None, errors: Mapping[str, str] | None = None
) -> Raw:
    """The archs probe's answer, as the probe prints it: torch's `_cuda_getArchFlags()` text (None: a CPU
    torch), each file's fatbin (path relative to site-packages -> (its SASS, its PTX), space-separated), and the
    files it could not read. Every value is the caller's literal."""
    found = {path: {"sass": sass.split(), "ptx": ptx.split()} for path, (sass, ptx) in (files or {}).items()}
    return {"torch_flags": torch_flags, "files": found, "errors": dict(errors or {})}


FAKE_ADDRESS = "unix:///fake/docker.sock"
NO_ID = "sha256:" + "0" * 64
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def image_manifest(config: str, name: str) -> bytes:
    """An image manifest as a registry serves one: its configuration `config` (the image id), no layers here,
    `name` in an annotation so that each push's manifest is its own."""
    document = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": 1},
        "layers": [],
        "annotations": {"fake.name": name},
    }
    return json.dumps(document).encode()


def platform_words(platform: Any) -> str:
    """`linux/arm64` of an index entry's platform object."""
    return "/".join(str(platform[k]) for k in ("os", "architecture", "variant") if platform.get(k)) if platform else ""


def machine_answer(uname: str, *files: tuple[str, str]) -> Raw:
    """The facts probe's `machine` answer: what `uname -m` says, and each file's ELF machine (path, machine)."""
    return {"uname": uname, "files": dict(files)}


# What an x86_64 image's interpreter and torch are built for, as the probe reports it.
X86_64_MACHINE = machine_answer(
    "x86_64",
    ("/usr/bin/python3.10", "x86_64"),
    ("/opt/venv/lib/python3.10/site-packages/torch/_C.cpython-310-x86_64-linux-gnu.so", "x86_64"),
    ("/opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_cpu.so", "x86_64"),
)


def probe_answer(
    torch: str,
    *,
    python: str,
    os: tuple[str, str],
    cuda: str | None = None,
    cudnn: int | None = None,
    nccl: Sequence[int] | None = None,
    torchvision: str | None = None,
    torchaudio: str | None = None,
    machine: Raw | None = None,
    **extra: Any,
) -> Raw:
    """The facts probe's raw answer, as the probe prints it: `cudnn` is torch.backends.cudnn.version()
    (90100 for 9.1.0), `nccl` torch.cuda.nccl.version() ([2, 21, 5]), `os` /etc/os-release's (ID, VERSION_ID),
    the companions their `__version__` (None: not installed), `machine` the machines (default X86_64_MACHINE).
    Every value is the caller's literal."""
    return {
        "torch": torch,
        "cuda": cuda,
        "cudnn": cudnn,
        "nccl": list(nccl) if nccl is not None else None,
        "python": python,
        "os": {"id": os[0], "version_id": os[1]},
        "torchvision": {"version": torchvision, "error": None},
        "torchaudio": {"version": torchaudio, "error": None},
        "machine": X86_64_MACHINE if machine is None else machine,
        **({} if cuda else {ARCHS_ANSWER: NO_GPU_CODE}),  # a CUDA image's test says what it holds
        **extra,
    }


# The values environment markers read in a Linux x86_64 image with CPython 3.10 (the probe's `environment`).
LINUX_X86_64 = {
    "implementation_name": "cpython",
    "os_name": "posix",
    "platform_machine": "x86_64",
    "platform_python_implementation": "CPython",
    "platform_release": "6.1.0",
    "platform_system": "Linux",
    "python_full_version": "3.10.12",
    "python_version": "3.10",
    "sys_platform": "linux",
}


def library_answer(
    loaded: Sequence[tuple[str, str | None, str | None]],
    distributions: Mapping[str, tuple[str, Sequence[str]]],
    *,
    prefix: str = "/opt/venv",
    lazily: Sequence[str] = (),
    failed: Sequence[tuple[str, str, str, str]] = (),
    environment: Mapping[str, str] | None = None,
) -> Raw:
    """The facts probe's `libraries` answer, as the probe prints it: each loaded file (path, the distribution
    whose RECORD lists it and its version, or None twice), the paths of `loaded` the probe loaded by path
    (`lazily`), the files it could not load (path, distribution, version, error), torch's and NVIDIA's distributions
    (version, Requires-Dist). Every value is the caller's literal."""
    return {
        "prefix": prefix,
        "environment": dict(environment or LINUX_X86_64),
        "distributions": {name: {"version": v, "requires": list(r)} for name, (v, r) in distributions.items()},
        "loaded": [
            {"path": p, "distribution": d, "version": v, "how": "by path" if p in lazily else "import"}
            for p, d, v in loaded
        ],
        "failed": [{"path": p, "distribution": d, "version": v, "error": e} for p, d, v, e in failed],
    }


# The constraints file's first line, as the templates write it (torchimages/building/constraints.py HEADER).
CONSTRAINTS_HEADER = (
    "# torchimages: the versions this image was built with; pip (PIP_CONSTRAINT) and uv (UV_CONSTRAINT) keep them"
)


def constraints_answer(
    text: str | None,
    installed: Mapping[str, str],
    *,
    environment: Mapping[str, str | None] | None = None,
    path: str = "/etc/pip/constraint.txt",
) -> Raw:
    """The facts probe's `constraints` answer, as the probe prints it: the file's text (None: no file), every
    installed distribution's version, and PIP_CONSTRAINT and UV_CONSTRAINT (default: both name the file).
    Every value is the caller's literal."""
    found: Raw = {"missing": True} if text is None else {"text": text}
    variables = {"PIP_CONSTRAINT": path, "UV_CONSTRAINT": path} if environment is None else dict(environment)
    return {"path": path, **found, "installed": dict(installed), "environment": variables}


# What a true torch 2.7.x+cu118 image (Python 3.10) loads, written out: torch's Requires-Dist pins cuDNN
# 9.1.0.70, NCCL 2.21.5 and cuBLAS 11.11.3.6 (cu11 wheels; 2.7.1 pins the same); libcudnn_cnn is one
# cuDNN opens lazily (the probe loaded it by path).
CU118_SITE = "/opt/venv/lib/python3.10/site-packages"
CU118_LINUX = '; platform_system == "Linux" and platform_machine == "x86_64"'
CU118_LIBRARIES = library_answer(
    [
        (f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn.so.9", "nvidia-cudnn-cu11", "9.1.0.70"),
        (f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn_graph.so.9", "nvidia-cudnn-cu11", "9.1.0.70"),
        (f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn_cnn.so.9", "nvidia-cudnn-cu11", "9.1.0.70"),
        (f"{CU118_SITE}/nvidia/nccl/lib/libnccl.so.2", "nvidia-nccl-cu11", "2.21.5"),
        (f"{CU118_SITE}/nvidia/cublas/lib/libcublas.so.11", "nvidia-cublas-cu11", "11.11.3.6"),
        (f"{CU118_SITE}/nvidia/cublas/lib/libcublasLt.so.11", "nvidia-cublas-cu11", "11.11.3.6"),
        (f"{CU118_SITE}/nvidia/cuda_runtime/lib/libcudart.so.11.0", "nvidia-cuda-runtime-cu11", "11.8.89"),
    ],
    {
        "torch": (
            "2.7.0+cu118",
            [
                "nvidia-cuda-runtime-cu11==11.8.89" + CU118_LINUX,
                "nvidia-cudnn-cu11==9.1.0.70" + CU118_LINUX,
                "nvidia-cublas-cu11==11.11.3.6" + CU118_LINUX,
                "nvidia-nccl-cu11==2.21.5" + CU118_LINUX,
            ],
        ),
        "nvidia-cublas-cu11": ("11.11.3.6", []),
        "nvidia-cuda-runtime-cu11": ("11.8.89", []),
        "nvidia-cudnn-cu11": ("9.1.0.70", ["nvidia-cublas-cu11"]),
        "nvidia-nccl-cu11": ("2.21.5", []),
    },
    lazily=[f"{CU118_SITE}/nvidia/cudnn/lib/libcudnn_cnn.so.9"],
)


class FakeEngine:
    """An engine in memory. Builds succeed (or return `build_status`) and the image built holds `holds` (the
    facts probe's answer); `add` puts an image there as if pulled or built elsewhere. Every call is recorded
    in `calls`; the lists below say what was built, probed, tagged, pushed and pulled."""

    def __init__(
        self,
        holds: Raw | None = None,
        *,
        build_status: int = 0,
        images: Iterable[ImageInfo] = (),
        gpu_runtime: bool = False,
        python_output: str | None = None,
        python_error: EngineError | None = None,
    ) -> None:
        self.holds = holds  # what every image this engine builds holds
        self.build_status = build_status
        self.gpu_runtime = gpu_runtime
        self.python_output = python_output  # when set, every run_python prints this (a scripted probe)
        self.python_error = python_error  # when set, every run_python raises it
        # A part of a combined run (probes.combined_program) -> the literal text it prints instead of its answer
        # (a test of a failing or unreadable part); the other parts answer as usual.
        self.part_output: dict[str, str] = {}
        self.shell_answer: ShellResult | EngineError | None = None  # what every run_shell returns (or raises)
        self.shell_answers: dict[str, ShellResult] = {}  # a line of the script -> what that script's run returns
        self.shells: list[tuple[str, str, str, str | None, float]] = []  # (reference, script, user, network, timeout)
        self.calls: list[tuple[str, Any]] = []
        self.images: dict[str, dict[str, str]] = {}  # reference -> labels
        self.truth: dict[str, Raw] = {}  # reference -> what the image holds (the probe's answer)
        self.details: dict[str, ImageInfo] = {}  # reference -> what `add` was told beyond labels
        self.ids: dict[str, str] = {}  # reference -> image id
        self.layers: dict[str, tuple[str, ...]] = {}
        self.registry: dict[str, tuple[Raw, str]] = {}  # pullable: reference -> (what it holds, id)
        self.push_errors: dict[str, list[list[str]]] = {}  # repository:tag -> the errors of each push, in turn
        self.manifests: dict[str, str] = {}  # repository:tag pushed -> its manifest digest in the registry
        # The registry: what it serves (repository@digest -> the bytes) and what each tag names (repository:tag ->
        # digest); `serve` puts a manifest there, push and create_index write there as a registry would.
        self.served: dict[str, bytes] = {}
        self.tags_served: dict[str, str] = {}
        self.client_error: EngineError | None = None  # check_client's: the docker CLI does not answer for the engine
        self.index_errors: list[str] = []  # create_index's errors
        self.point_errors: dict[str, list[str]] = {}  # repository:tag -> point_tag's errors for it (it is not moved)
        self.index_annotations: list[tuple[tuple[str, str], ...]] = []  # each create_index's annotations
        self.sbom = SbomAttestation(False, "a fake engine keeps no attestations")
        self.containerd_store = False  # DockerEngine.containerd_store: the classic store's answers
        # reference -> what `attestations` answers (an EngineError is raised): none named, no attestations kept
        self.attested: dict[str, Attested | EngineError] = {}
        self.platform_of: dict[str, str] = {}  # manifest digest -> its image's platform (by the build that made it)
        self.built: list[BuildRequest] = []
        self.imported: list[tuple[str, tuple[str, ...], int]] = []  # (reference, changes, bytes of the tar)
        self.import_status = 0
        self.probed: list[str] = []  # references the facts probe ran in
        self.tagged: list[str] = []  # public names given
        self.held: list[str] = []  # temporary names given (a runtime image devel is built on)
        self.pushed: list[str] = []
        self.pulled: list[str] = []
        self.removed: list[str] = []
        self.containers: list[str] = []  # running containers
        self.saved: list[tuple[str, Path]] = []
        self.archives: dict[str, bytes] = {}  # reference -> its `docker save` archive (the test's literal bytes)
        self.export_error: EngineError | None = None  # when set, `exported` raises it on leaving (a broken export)
        self.cache_problem: str | None = None  # check_cache raises EngineError(this) when set
        self.gzip_problem: str | None = None  # gzip_level_problem's answer
        self.stored: dict[str, StoredLayers] = {}  # stored_layers' answers (none: the layer scan reads `exported`)
        # The content store's documents (digest -> the test's literal bytes), what stored_blob answers (None for
        # none); hold_index puts an index there and names it (held_indexes).
        self.documents: dict[str, bytes] = {}
        self.hold_error: EngineError | None = None  # when set, hold_index raises it
        self.held_indexes: list[tuple[str, bytes]] = []
        # When set, the image a build makes is named by the document this returns for its request (the containerd
        # store: its id is its own index's digest), which the content store then holds.
        self.build_document: Callable[[BuildRequest], bytes] | None = None
        self.compressed: int | None = None  # compressed_size's answer
        self.on_build: Callable[[BuildRequest], None] | None = None  # e.g. an interrupt during a build
        self.platforms: dict[str, str] = {}  # reference -> the platform its build was asked for
        self.holds_by_platform: dict[str, Raw] = {}  # platform -> what an image built for it holds (over `holds`)
        self.up = True  # whether the engine answers a ping
        self.takes_contexts = True  # named_contexts' answer (False: a 20.10 engine)
        self.ignores_contexts = False  # True: builds ignore named contexts (an image not on its runtime)
        # What the security gate's package probe prints (`name==version` lines): by default none, so the gate's
        # pip-audit does not run (its scan says "not scanned"); a test of it gives the literal lines.
        self.venv_packages = ""
        self.size = 1_000_000_000  # every image's size (bytes)
        self.steps = [HistoryEntry(f"RUN step {n}", n * 100_000_000) for n in range(1, 8)]  # its history
        for info in images:
            self.add(info)

    # --- setting the scene ---------------------------------------------------------------

    def add(self, info: ImageInfo, holds: Raw | None = None) -> None:
        """An image already here (pulled, built elsewhere, a user's), holding `holds`."""
        self.images[info.reference] = dict(info.labels)
        self.details[info.reference] = info
        self.ids[info.reference] = info.id
        self.layers[info.reference] = info.layers
        if holds is not None:
            self.truth[info.reference] = holds

    def serve(self, repository: str, raw: bytes, tags: Iterable[str] = ()) -> str:
        """The registry serves `raw` in `repository`, by its digest and under each of `tags`; its digest."""
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        self.served[f"{repository}@{digest}"] = raw
        for tag in tags:
            self.tags_served[f"{repository}:{tag}"] = digest
        return digest

    @property
    def indexes(self) -> dict[str, dict[str, str]]:
        """repository:tag -> the index the registry serves there (platform -> digest), for each tag naming one."""
        found = {}
        for name, digest in self.tags_served.items():
            document = json.loads(self.served[f"{name.rsplit(':', 1)[0]}@{digest}"])
            if "manifests" in document:
                found[name] = {platform_words(m.get("platform")): m["digest"] for m in document["manifests"]}
        return found

    def temporary(self) -> list[str]:
        """The temporary references (references.TEMP_REPOSITORY) still here."""
        return [r for r in self.images if r.startswith(TEMP_REPOSITORY + "/")]

    # --- the Engine protocol -------------------------------------------------------------

    def build(self, request: BuildRequest, log: IO[bytes], cancelled: threading.Event | None = None) -> int:
        self.calls.append(("build", request))
        self.built.append(request)
        if self.on_build:
            self.on_build(request)
        if self.build_status == 0:
            self.images[request.reference] = {"io.torchimages.flavor": request.target, **dict(request.labels)}
            self.ids[request.reference] = "sha256:" + hashlib.sha256(request.reference.encode()).hexdigest()
            if self.build_document is not None:
                document = self.build_document(request)
                self.ids[request.reference] = "sha256:" + hashlib.sha256(document).hexdigest()
                self.documents[self.ids[request.reference]] = document
            self.platforms[request.reference] = request.platform or "linux/amd64"
            below = (
                ""
                if self.ignores_contexts
                else dict(request.contexts).get("runtime", "").removeprefix("docker-image://")
            )
            self.layers[request.reference] = (*self.layers.get(below, ()), f"layer of {request.reference}")
            holds = self.holds_by_platform.get(request.platform or "linux/amd64", self.holds)
            if holds is not None:
                self.truth[request.reference] = holds
        return self.build_status

    def sbom_attestation(self) -> SbomAttestation:
        self.calls.append(("sbom_attestation", None))
        return self.sbom

    def attestations(self, reference: str, platform: str, cancelled: threading.Event | None = None) -> Attested:
        self.calls.append(("attestations", reference))
        found = self.attested.get(reference, EngineError(f"{reference}: no attestations kept (fake engine)"))
        if isinstance(found, EngineError):
            raise found
        return found

    def named_contexts(self) -> bool:
        self.calls.append(("named_contexts", None))
        return self.takes_contexts

    def import_rootfs(
        self, tar_stream: IO[bytes], reference: str, changes: Sequence[str], log: IO[bytes], platform: str | None = None
    ) -> int:
        self.calls.append(("import_rootfs", (reference, tuple(changes), platform)))
        self.imported.append((reference, tuple(changes), len(tar_stream.read())))
        if self.import_status == 0:
            self.images[reference] = {}
        return self.import_status

    def labels(self, reference: str) -> dict[str, str] | None:
        self.calls.append(("labels", reference))
        return self.images.get(reference)

    def inspect(self, reference: str) -> ImageInfo | None:
        self.calls.append(("inspect", reference))
        if reference not in self.images:
            return None
        info = self.details.get(reference) or ImageInfo(reference, NO_ID, {}, {}, "", (), size=self.size)
        repository = reference.rsplit(":", 1)[0] if ":" in reference.rsplit("/", 1)[-1] else reference
        pushed = tuple(
            f"{repository}@{d}" for name, d in self.manifests.items() if self.ids.get(name) == self.ids.get(reference)
        )
        return dataclasses.replace(
            info,
            labels=self.images[reference],
            id=self.ids.get(reference, info.id),
            layers=self.layers.get(reference, info.layers),
            repo_digests=info.repo_digests + pushed,
        )

    def pull(self, reference: str) -> list[str]:
        self.calls.append(("pull", reference))
        self.pulled.append(reference)
        if reference not in self.registry:
            return [f"pulling {reference} failed: manifest unknown"]
        self.truth[reference], self.ids[reference] = self.registry[reference]
        self.images.setdefault(reference, {})  # an image pulled again keeps what `add` said of it
        return []

    def run_python(self, reference: str, args: list[str]) -> str:
        self.calls.append(("run_python", (reference, args)))
        if self.python_error is not None:
            raise self.python_error
        if self.python_output is not None:
            return self.python_output
        if reference not in self.images:
            raise EngineError(f"no image {reference}")
        if args == ["-c", probe_source("facts")]:
            return self._answer(reference, "facts")
        if args == ["-c", probe_source("cuda_archs")]:
            return self._answer(reference, "cuda_archs")
        nonce = program_nonce(args[-1]) if len(args) == 2 else None
        if nonce is not None and args == ["-c", combined_source(COMBINED, nonce)]:
            # as the combined program writes it: each part's mark (with the run's nonce) on a line of its own,
            # then the part's output; then the end mark
            parts = (f"\n{PART_MARK}{nonce}:{name}\n{self._answer(reference, name)}" for name in COMBINED)
            return "interpreter noise\n" + "".join(parts) + f"\n{END_MARK}{nonce}\n"
        if args == ["-c", PACKAGES_PROBE]:
            return self.venv_packages
        if args == ["-c", INSTALLED_PROBE]:
            torch = self.truth.get(reference, {}).get("torch", "unknown")
            return f"# OS packages\ngcc=12.2.0-14\n# Python packages\ntorch=={torch}\n"
        raise AssertionError(f"the fake engine knows no such probe: {args!r:.200}")

    def _answer(self, reference: str, probe: str) -> str:
        """What the facts or the archs probe prints in `reference`: the test's literal answer."""
        if probe in self.part_output:
            return self.part_output[probe]
        if probe == "facts":
            self.probed.append(reference)
            facts = {k: v for k, v in self.truth[reference].items() if k != ARCHS_ANSWER}
            return "probe noise\n" + MARK + json.dumps(facts) + "\n"
        if ARCHS_ANSWER not in self.truth[reference]:
            raise AssertionError(f"the test says not what GPU architectures {reference} holds ({ARCHS_ANSWER})")
        return "probe noise\n" + MARK + json.dumps(self.truth[reference][ARCHS_ANSWER]) + "\n"

    def run_shell(
        self, reference: str, script: str, *, user: str = "", network: str | None = None, timeout_s: float = 600.0
    ) -> ShellResult:
        self.calls.append(("run_shell", (reference, user, network)))
        self.shells.append((reference, script, user, network, timeout_s))
        lines = script.splitlines()
        for marker, answer in self.shell_answers.items():
            if marker in lines:
                return answer
        if isinstance(self.shell_answer, EngineError):
            raise self.shell_answer
        if self.shell_answer is None:  # a test not about the script: the check that runs it says "not scanned"
            raise EngineError("the fake engine was given no run_shell answer (shell_answer)")
        return self.shell_answer

    def start_container(
        self, reference: str, *, name: str, gpus: bool, shm_size: str, run_args: Sequence[str] = ()
    ) -> None:
        self.calls.append(("start_container", (reference, gpus, shm_size, tuple(run_args))))
        self.containers.append(name)

    def remove_container(self, name: str) -> None:
        self.calls.append(("remove_container", name))
        if name in self.containers:
            self.containers.remove(name)

    def gpu_runtime_available(self) -> bool:
        self.calls.append(("gpu_runtime_available", None))
        return self.gpu_runtime

    def tag(self, reference: str, repository: str, tag: str) -> None:
        self.calls.append(("tag", (reference, repository, tag)))
        if reference not in self.images:  # by its id (the first name that has it), as an engine finds one
            reference = next((r for r, i in self.ids.items() if i == reference and r in self.images), reference)
        assert reference in self.images, f"tagging a missing image {reference}"
        self.images[f"{repository}:{tag}"] = self.images[reference]
        if reference in self.attested:  # a name of the same image: the same index, the same attestations
            self.attested[f"{repository}:{tag}"] = self.attested[reference]
        name = f"{repository}:{tag}"
        if reference in self.layers:
            self.layers[name] = self.layers[reference]
        if reference in self.ids:
            self.ids[name] = self.ids[reference]
        if reference in self.truth:
            self.truth[name] = self.truth[reference]
        if reference in self.platforms:
            self.platforms[name] = self.platforms[reference]
        (self.held if repository.startswith(TEMP_REPOSITORY + "/") else self.tagged).append(f"{repository}:{tag}")

    def push(
        self,
        repository: str,
        tags: Sequence[str],
        say: Callable[[str], None] | None = None,
        compression: str = "gzip",
    ) -> list[str]:
        errors = []
        for tag in tags:
            self.calls.append(("push", (repository, tag, compression)))
            name = f"{repository}:{tag}"
            assert name in self.images, f"pushing a missing image {name}"
            queued = self.push_errors.get(name)
            refused = queued.pop(0) if queued else []
            if not refused:
                self.pushed.append(name)
                digest = self.serve(repository, image_manifest(self.ids.get(name, NO_ID), name), [tag])
                self.manifests[name] = digest
                self.registry[f"{repository}@{digest}"] = (self.truth.get(name, {}), self.ids.get(name, NO_ID))
                self.platform_of[digest] = self.platforms.get(name, "linux/amd64")
            errors += refused
        return errors

    def create_index(
        self,
        repository: str,
        names: Sequence[str],
        sources: Sequence[str],
        annotations: Sequence[tuple[str, str]] = (),
    ) -> list[str]:
        """As buildx writes one: each source's entry (an index's entries, flattened), its platform by the build
        that made it, an OCI index with the annotations, under each name."""
        self.calls.append(("create_index", (repository, tuple(names), tuple(sources))))
        self.index_annotations.append(tuple(annotations))
        if self.index_errors:
            return list(self.index_errors)
        entries: list[Any] = []
        for source in sources:
            if source not in self.served:
                return [f"ERROR: {source}: not found"]
            document = json.loads(self.served[source])
            digest = source.rsplit("@", 1)[1]
            if "manifests" in document:
                entries += document["manifests"]
                continue
            platform = dict(zip(("os", "architecture"), self.platform_of[digest].split("/"), strict=True))
            entries.append(
                {
                    "mediaType": document["mediaType"],
                    "digest": digest,
                    "size": len(self.served[source]),
                    "platform": platform,
                }
            )
        index: dict[str, Any] = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        if annotations:
            index["annotations"] = dict(annotations)
        self.serve(repository, json.dumps(index, indent=3).encode(), names)
        return []

    def point_tag(self, repository: str, tag: str, digest: str) -> list[str]:
        self.calls.append(("point_tag", (repository, tag, digest)))
        name = f"{repository}:{tag}"
        if name in self.point_errors:
            return list(self.point_errors[name])
        if f"{repository}@{digest}" not in self.served:
            return [f"ERROR: {repository}@{digest}: not found"]
        self.tags_served[name] = digest
        return []

    def manifest(self, reference: str) -> bytes | None:
        self.calls.append(("manifest", reference))
        if "@" in reference:
            return self.served.get(reference)
        digest = self.tags_served.get(reference)
        return None if digest is None else self.served[f"{reference.rsplit(':', 1)[0]}@{digest}"]

    def check_client(self) -> None:
        self.calls.append(("check_client", None))
        if self.client_error is not None:
            raise self.client_error

    def answers(self) -> bool:
        self.calls.append(("answers", None))
        return self.up

    def address(self) -> str:
        return FAKE_ADDRESS

    def remove_image(self, reference: str) -> None:
        self.calls.append(("remove_image", reference))
        if self.images.pop(reference, None) is not None:
            self.removed.append(reference)

    def history(self, reference: str) -> list[HistoryEntry]:
        self.calls.append(("history", reference))
        assert reference in self.images, f"the history of a missing image {reference}"
        return list(self.steps)

    def stored_layers(self, reference: str, cancelled: threading.Event | None = None) -> StoredLayers | None:
        self.calls.append(("stored_layers", reference))
        return self.stored.get(reference)

    def stored_blob(self, digest: str) -> bytes | None:
        self.calls.append(("stored_blob", digest))
        return self.documents.get(digest)

    def hold_index(self, reference: str, document: bytes) -> None:
        self.calls.append(("hold_index", reference))
        if self.hold_error is not None:
            raise self.hold_error
        if not self.containerd_store:
            raise EngineError(f"{reference}: the engine's classic image store holds no index")
        digest = "sha256:" + hashlib.sha256(document).hexdigest()
        self.documents[digest] = document
        self.images[reference], self.ids[reference] = {}, digest
        self.held_indexes.append((reference, document))

    @contextlib.contextmanager
    def exported(self, reference: str, cancelled: threading.Event | None = None) -> Iterator[IO[bytes]]:
        self.calls.append(("exported", reference))
        if reference not in self.archives:
            raise EngineError(f"no image {reference} here to export")
        yield io.BytesIO(self.archives[reference])
        if self.export_error is not None:
            raise self.export_error

    # --- DockerEngine's methods beyond the protocol ----------------------------------------

    def check_cache(self, cache_from: Sequence[CacheSpec], cache_to: Sequence[CacheSpec]) -> None:
        self.calls.append(("check_cache", (tuple(cache_from), tuple(cache_to))))
        if self.cache_problem and (cache_from or cache_to):
            raise EngineError(self.cache_problem)

    def gzip_level_problem(self) -> str | None:
        self.calls.append(("gzip_level_problem", ()))
        return self.gzip_problem

    def images_labelled(self, key: str, value: str) -> list[ImageInfo]:
        self.calls.append(("images_labelled", (key, value)))
        found = [self.inspect(r) for r, labels in self.images.items() if labels.get(key) == value]
        return [info for info in found if info is not None]

    def save(self, reference: str, path: Path) -> None:
        self.calls.append(("save", (reference, path)))
        if reference not in self.images:
            raise EngineError(f"no image {reference}")
        path.write_bytes(b"fake docker-archive of " + reference.encode())
        self.saved.append((reference, path))

    def compressed_size(self, reference: str) -> int | None:
        self.calls.append(("compressed_size", reference))
        return self.compressed


# The GPU architectures of torch 2.7.x+cu118 on linux/amd64 and of its torchvision, as the archs probe reports them
# (compat.yaml's S fact: cuobjdump of the conda packages).
CU118_ARCHS = archs_answer(
    "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90",
    {
        "torch/lib/libtorch_cuda.so": ("sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", ""),
        "torchvision/_C.so": ("sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", ""),
        "torchaudio/lib/libtorchaudio.so": ("sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90", ""),
    },
)


# What a true torch 2.7.0+cu118 image holds, as the facts probe reports it: torch says cuDNN 90100 (the wheel
# pins 9.1.0.70) and NCCL 2.21.5; ubuntu22.04's Python 3.10; the NVIDIA libraries of those wheels.
CU118_270 = probe_answer(
    "2.7.0+cu118",
    cuda="11.8",
    cudnn=90100,
    nccl=[2, 21, 5],
    python="3.10",
    os=("ubuntu", "22.04"),
    torchvision="0.22.0+cu118",
    torchaudio="2.7.0+cu118",
    libraries=CU118_LIBRARIES,
    cuda_archs_probe=CU118_ARCHS,
)
