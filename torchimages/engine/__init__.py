"""The container engine: the only package that talks to Docker.

    types.py          the `Engine` protocol the rest of the tool uses, its requests, answers and errors
    requests.py       command lines: a BuildKit build of one target, a long-running test container, a script
    process.py        commands in their own process group, stopped as a whole on cancel; one's output streamed;
                      one bounded in time and output
    manifests.py      what a registry serves under a reference (image manifest, index), parsed and checked: pure
    push.py           push retries: transient errors only, exponential backoff
    zstd_push.py      pushes with zstd layers: docker save by id, proven, an OCI layout uploaded by skopeo
    discovery.py      a docker client that builds with BuildKit; one that runs `docker buildx`
    attestation.py    the SBOM and provenance attestations (where the engine keeps them; read from an image's
                      index and blobs), OCI annotations from labels
    content_store.py  blobs of the engine's containerd content store by digest (`ctr content get`, each hashed)
    sbom_generator.py the SBOM generator image BuildKit runs, made here from the pinned syft and a static busybox
    docker_engine.py  `DockerEngine`: the protocol through the docker SDK and a BuildKit CLI client

The docker SDK is imported only when a `DockerEngine` connects. Unit tests use an in-memory fake with the
same methods (tests/fakes.py).
"""

from torchimages.engine.attestation import (
    NOT_ASKED,
    AttestationError,
    Attested,
    SbomAttestation,
    oci_annotations,
    read_attested,
    sbom_attestation,
    shared_annotations,
    uses_containerd_store,
)
from torchimages.engine.discovery import BUILDKIT_PROBE, find_build_client, find_buildx, takes_named_contexts
from torchimages.engine.docker_engine import (
    CONNECTION_ERRORS,
    DockerEngine,
    EngineFacts,
    container_name,
    engine_address,
    engine_facts,
    stored_size,
)
from torchimages.engine.process import CANCEL_GRACE_S, CANCEL_POLL_S, run_cancellable, stop_group
from torchimages.engine.push import PUSH_BACKOFF_S, PUSH_TRIES, push_with_retries, transient
from torchimages.engine.requests import (
    BuildClient,
    build_command,
    index_command,
    run_command,
    shell_command,
    split_run_args,
)
from torchimages.engine.types import (
    BUILTIN_CACHE_EXPORTS,
    BUILTIN_CACHE_IMPORTS,
    CACHE_TYPES,
    HOW_TO_GET_AN_ENGINE,
    HOW_TO_GET_BUILDKIT,
    TAG_PLACEHOLDER,
    BuildRequest,
    CacheSpec,
    Engine,
    EngineError,
    HistoryEntry,
    ImageInfo,
    ProbeError,
    ShellResult,
    StoredLayers,
    cache_problem,
)

__all__ = [
    "BUILDKIT_PROBE",
    "BUILTIN_CACHE_EXPORTS",
    "BUILTIN_CACHE_IMPORTS",
    "CACHE_TYPES",
    "CANCEL_GRACE_S",
    "CANCEL_POLL_S",
    "CONNECTION_ERRORS",
    "HOW_TO_GET_AN_ENGINE",
    "HOW_TO_GET_BUILDKIT",
    "NOT_ASKED",
    "PUSH_BACKOFF_S",
    "PUSH_TRIES",
    "TAG_PLACEHOLDER",
    "AttestationError",
    "Attested",
    "BuildClient",
    "BuildRequest",
    "CacheSpec",
    "DockerEngine",
    "Engine",
    "EngineError",
    "EngineFacts",
    "HistoryEntry",
    "ImageInfo",
    "ProbeError",
    "SbomAttestation",
    "ShellResult",
    "StoredLayers",
    "build_command",
    "cache_problem",
    "container_name",
    "engine_address",
    "engine_facts",
    "find_build_client",
    "find_buildx",
    "index_command",
    "oci_annotations",
    "push_with_retries",
    "read_attested",
    "run_cancellable",
    "run_command",
    "sbom_attestation",
    "shared_annotations",
    "shell_command",
    "split_run_args",
    "stop_group",
    "stored_size",
    "takes_named_contexts",
    "transient",
    "uses_containerd_store",
]
