"""The smoke suites' pytest plugin: options, markers, fixtures, report hooks.

Registered by name, never found by path:

    python -m pytest -p torchimages.smoke.plugin --pyargs torchimages.smoke.suites \
        --hosts=docker://C --image-spec SPEC.json [--facts FACTS.json] [--require-gpu] \
        [--python-exe python] [-m "cpu or gpu or multi_gpu or multi_node"]

Facts that need `import torch` are gathered once per host and session (one probe
process each for facts, torch.compile on the CPU, single-GPU checks, torch.compile on
the GPU, the CUDA extension and NCCL); the tests only compare. `--facts` hands over the
facts probe's answer that verification already read from the same image, so it is not
run twice. The report header, the terminal summary and the JUnit file name the GPU, the
driver and the image digest.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import testinfra
import testinfra.host

from torchimages import settings, textfile
from torchimages.probes import ScriptResult, probe_source, run_probe, run_script
from torchimages.problems import InputError
from torchimages.smoke import throughput
from torchimages.smoke.diagnosis import GpuQuery, GpuStatus, diagnose, query_gpus
from torchimages.smoke.document import SmokeSpec, SpecError, load_spec
from torchimages.smoke.hosts import container_inspect, host_id, is_docker, is_local

T = TypeVar("T")
REQUIRE_GPU_PREFIX = "--require-gpu:"
SPEC_KEY = pytest.StashKey[SmokeSpec]()
FACTS_KEY = pytest.StashKey[dict[str, Any]]()
CONTEXT_KEY = pytest.StashKey["RunContext"]()
BANDWIDTH_KEY = pytest.StashKey[list[dict[str, Any]]]()
THROUGHPUT_KEY = pytest.StashKey[dict[str, list[float]]]()
THROUGHPUT_GPU_KEY = pytest.StashKey[dict[str, str]]()  # {"gpu": the GPU name the throughput probe ran on}
MARKERS = {
    "cpu": "needs no GPU: versions, libraries, users, labels",
    "gpu": "needs one GPU; skipped without one unless --require-gpu",
    "multi_gpu": "NCCL across every visible GPU; skipped without one unless --require-gpu",
    "multi_node": "torchrun across two containers of the image on a network of their own (gloo; NCCL with 2 GPUs)",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchimages smoke")
    group.addoption("--image-spec", help="SPEC.json describing the image or host (required)")
    group.addoption(
        "--require-gpu",
        action="store_true",
        help="fail, instead of skip, GPU tests when the host has no usable GPU",
    )
    group.addoption(
        "--facts",
        help="the facts probe's answer (JSON) already read from this image, instead of probing again",
    )
    group.addoption(
        "--python-exe",
        default="python",
        help="the Python (with torch) to probe inside the host (default: python)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
    config.stash[BANDWIDTH_KEY] = []
    config.stash[THROUGHPUT_KEY] = {}
    config.stash[THROUGHPUT_GPU_KEY] = {}
    if any(getattr(config.option, name, False) for name in ("help", "markers", "showfixtures")):
        return
    path = config.getoption("--image-spec")
    if not path:
        raise pytest.UsageError(
            "--image-spec SPEC.json is required: the smoke suites compare the image with "
            "it (for this machine: `python build.py test --host local`)"
        )
    try:
        config.stash[SPEC_KEY] = load_spec(path)
    except SpecError as exc:
        raise pytest.UsageError(str(exc)) from exc
    facts = config.getoption("--facts")
    if facts:
        try:
            config.stash[FACTS_KEY] = textfile.read_json_object(Path(facts), "the facts file (--facts)")
        except InputError as exc:
            raise pytest.UsageError("; ".join(str(p) for p in exc.problems)) from None


# --- what the report says about the run ---------------------------------------------


@dataclass(frozen=True)
class RunContext:
    """GPU, driver and image digest of the host under test, for the report."""

    host: str
    gpus: str
    driver: str
    image: str
    image_digest: str


def _first_host(config: pytest.Config) -> testinfra.host.Host:
    hosts = config.getoption("hosts") or "local://"
    return testinfra.get_host(hosts.split(",")[0], connection=config.getoption("connection"))


def _image_digest(host: testinfra.host.Host) -> str:
    """The id of the image the container runs."""
    if not is_docker(host):
        return "none (local host)"
    return container_inspect(host, "{{.Image}}") or "unknown"


def run_context(config: pytest.Config) -> RunContext:
    """Computed once per session (a few shell commands in the host, no torch)."""
    if CONTEXT_KEY in config.stash:
        return config.stash[CONTEXT_KEY]
    spec = config.stash[SPEC_KEY]
    host = _first_host(config)
    try:
        query = query_gpus(host)
        gpus = ", ".join(query.names) or "none visible"
        driver = query.driver or "none"
    except Exception as exc:
        gpus, driver = f"unknown ({exc})", "unknown"
    try:
        digest = _image_digest(host)
    except Exception as exc:
        digest = f"unknown ({type(exc).__name__}: {exc})"
    context = RunContext(host_id(host), gpus, driver, spec.image or "none", digest)
    config.stash[CONTEXT_KEY] = context
    return context


def pytest_report_header(config: pytest.Config) -> list[str]:
    if SPEC_KEY not in config.stash:
        return []
    spec = config.stash[SPEC_KEY]
    context = run_context(config)
    return [
        f"smoke spec: {spec.tag} (torch {spec.torch}, cuda {spec.cuda}, "
        f"flavor {spec.flavor}, python {spec.python}, {spec.os})",
        f"smoke host: {context.host}; GPU: {context.gpus}; driver: {context.driver}",
        f"smoke image: {context.image}; digest: {context.image_digest}",
    ]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if CONTEXT_KEY not in config.stash:
        return
    context = config.stash[CONTEXT_KEY]
    write = terminalreporter.write_line
    terminalreporter.section("torchimages smoke")
    write(f"host {context.host}; GPU: {context.gpus}; driver: {context.driver}")
    write(f"image {context.image}; digest: {context.image_digest}")
    for name, samples in config.stash[THROUGHPUT_KEY].items():
        write(f"throughput {name:>18}: {throughput.spread(samples).describe(name)}")
    for row in config.stash[BANDWIDTH_KEY]:
        write(
            f"NCCL all_reduce {row['case']:>12} x{row['world']}: "
            f"{row['time_us']:10.1f} us  algbw {row['algbw_GBps']:8.2f} GB/s  "
            f"busbw {row['busbw_GBps']:8.2f} GB/s"
        )


@pytest.fixture(scope="session", autouse=True)
def _smoke_suite_properties(
    pytestconfig: pytest.Config, record_testsuite_property: Callable[[str, object], None]
) -> None:
    """GPU, driver and image digest as JUnit test-suite properties."""
    context = run_context(pytestconfig)
    spec = pytestconfig.stash[SPEC_KEY]
    record_testsuite_property("smoke_host", context.host)
    record_testsuite_property("gpu", context.gpus)
    record_testsuite_property("driver", context.driver)
    record_testsuite_property("image", context.image)
    record_testsuite_property("image_digest", context.image_digest)
    record_testsuite_property("spec_tag", spec.tag)


# --- options and per-host, per-session caches -----------------------------------------


@pytest.fixture(scope="session")
def spec(pytestconfig: pytest.Config) -> SmokeSpec:
    """The validated --image-spec."""
    return pytestconfig.stash[SPEC_KEY]


@pytest.fixture(scope="session")
def python_exe(pytestconfig: pytest.Config) -> str:
    return str(pytestconfig.getoption("--python-exe"))


@pytest.fixture(scope="session")
def require_gpu(pytestconfig: pytest.Config) -> bool:
    return bool(pytestconfig.getoption("--require-gpu"))


@pytest.fixture(scope="session")
def smoke_cache() -> dict[tuple[str, str], Any]:
    """Results keyed by (host, what): each probe runs once per host and session."""
    return {}


def cached(cache: dict[tuple[str, str], Any], key: tuple[str, str], make: Callable[[], T]) -> T:
    """cache[key], computed by make() the first time."""
    if key not in cache:
        cache[key] = make()
    return cast(T, cache[key])


@pytest.fixture(scope="module")
def image_host(host: testinfra.host.Host, spec: SmokeSpec) -> testinfra.host.Host:
    """The host, when it is an image; image-only checks skip on a bare local host."""
    if is_local(host) and spec.image is None:
        pytest.skip("image-only check: the host is local:// and the spec names no image")
    return host


@pytest.fixture(scope="module")
def facts(
    host: testinfra.host.Host, smoke_cache: dict[tuple[str, str], Any], python_exe: str, pytestconfig: pytest.Config
) -> dict[str, Any]:
    """The facts probe (versions, GPUs seen by torch, import stderr), once per host; --facts when given."""
    given = pytestconfig.stash.get(FACTS_KEY, None)
    if given is not None:
        return dict(given)
    result: ScriptResult = cached(smoke_cache, (host_id(host), "facts"), lambda: run_probe(host, python_exe, "facts"))
    if result.payload is None:
        pytest.fail(
            f"the facts probe did not run with {python_exe!r} in {host_id(host)}: "
            f"{result.describe()}\nPass the image's Python (with torch) as --python-exe.",
            pytrace=False,
        )
    return dict(result.payload)


@pytest.fixture(scope="module")
def gpu_query(host: testinfra.host.Host, smoke_cache: dict[tuple[str, str], Any]) -> GpuQuery:
    """nvidia-smi, device nodes and /dev/shm of the host."""
    return cached(smoke_cache, (host_id(host), "gpu_query"), lambda: query_gpus(host))


@pytest.fixture(scope="module")
def gpu_status(facts: dict[str, Any], gpu_query: GpuQuery, spec: SmokeSpec) -> GpuStatus:
    return diagnose(facts, gpu_query, spec)


@pytest.fixture(scope="module")
def gpu(gpu_status: GpuStatus, require_gpu: bool) -> GpuStatus:
    """A usable GPU, or a visible skip (a failure with --require-gpu) naming each cause."""
    if not gpu_status.usable:
        if require_gpu:
            pytest.fail(f"{REQUIRE_GPU_PREFIX} {gpu_status.message()}", pytrace=False)
        pytest.skip(gpu_status.message())
    return gpu_status


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Report a missing GPU under --require-gpu as the test's failure, not a setup error.

    The GPU is what the test checks, so "no GPU" is its verdict (FAILED in the
    summary, <failure> in JUnit), not a broken fixture.
    """
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    excinfo = call.excinfo
    if (
        report.when == "setup"
        and report.failed
        and excinfo is not None
        and excinfo.errisinstance(pytest.fail.Exception)
        and str(excinfo.value).startswith(REQUIRE_GPU_PREFIX)
    ):
        report.when = "call"


def _probe(
    host: testinfra.host.Host,
    cache: dict[tuple[str, str], Any],
    python_exe: str,
    name: str,
    args: tuple[str, ...] = (),
) -> ScriptResult:
    key = (host_id(host), name + ":" + ",".join(args))
    return cached(cache, key, lambda: run_probe(host, python_exe, name, args))


@pytest.fixture(scope="module")
def gpu_checks(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    smoke_cache: dict[tuple[str, str], Any],
    python_exe: str,
) -> ScriptResult:
    """Round trips, matmuls, convolutions and AMP: one process for all."""
    return _probe(host, smoke_cache, python_exe, "gpu_checks")


@pytest.fixture(scope="module")
def compile_cpu_run(
    host: testinfra.host.Host, smoke_cache: dict[tuple[str, str], Any], python_exe: str
) -> ScriptResult:
    """torch.compile against eager on the CPU, in its own process."""
    return _probe(host, smoke_cache, python_exe, "torch_compile", ("cpu",))


@pytest.fixture(scope="module")
def compile_gpu_run(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    smoke_cache: dict[tuple[str, str], Any],
    python_exe: str,
) -> ScriptResult:
    """torch.compile against eager on the GPU, in its own process."""
    return _probe(host, smoke_cache, python_exe, "torch_compile", ("cuda",))


@pytest.fixture(scope="module")
def nccl_run(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    smoke_cache: dict[tuple[str, str], Any],
    python_exe: str,
) -> ScriptResult:
    """The NCCL all_reduce probe, one rank per visible GPU."""
    return _probe(host, smoke_cache, python_exe, "nccl_allreduce")


@pytest.fixture(scope="module")
def extension_run(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    smoke_cache: dict[tuple[str, str], Any],
    python_exe: str,
) -> ScriptResult:
    """Build, load and run probe_scripts/cuda_extension.py in the host."""
    key = (host_id(host), "cuda_extension")
    return cached(smoke_cache, key, lambda: run_script(host, python_exe, probe_source("cuda_extension")))


@pytest.fixture(scope="session")
def bandwidth_rows(pytestconfig: pytest.Config) -> Iterator[list[dict[str, Any]]]:
    """NCCL bandwidth rows for the terminal summary."""
    yield pytestconfig.stash[BANDWIDTH_KEY]


@pytest.fixture(scope="module")
def venv_install_run(
    host: testinfra.host.Host, smoke_cache: dict[tuple[str, str], Any], python_exe: str
) -> ScriptResult:
    """A hand-made wheel installed into the image's venv by its user, then removed."""
    return _probe(host, smoke_cache, python_exe, "venv_install")


@pytest.fixture(scope="module")
def platform_run(host: testinfra.host.Host, smoke_cache: dict[tuple[str, str], Any], python_exe: str) -> ScriptResult:
    """Who runs, the folders a job writes, the verbs userspace, a DataLoader with workers: one process."""
    return _probe(host, smoke_cache, python_exe, "platform")


@pytest.fixture(scope="module")
def throughput_runs(
    host: testinfra.host.Host,
    gpu: GpuStatus,
    smoke_cache: dict[tuple[str, str], Any],
    python_exe: str,
) -> list[ScriptResult]:
    """The throughput probe (GEMM, a cuDNN convolution, an AMP step, pinned copies) in throughput.PROCESSES
    processes, one after another: a process's own noise (cuDNN's choice, the clocks, the host's load) shows in
    the figures' spread."""
    return [_probe(host, smoke_cache, python_exe, "throughput", (str(n),)) for n in range(1, throughput.PROCESSES + 1)]


@pytest.fixture(scope="session")
def throughput_gpu(pytestconfig: pytest.Config) -> dict[str, str]:
    """Where the throughput suite records the GPU name its probe ran on (`gpu`), for the reference written."""
    return pytestconfig.stash[THROUGHPUT_GPU_KEY]


@pytest.fixture(scope="session")
def throughput_figures(pytestconfig: pytest.Config) -> Iterator[dict[str, list[float]]]:
    """Each figure's samples, for the terminal summary; written to TORCHIMAGES_THROUGHPUT_OUT, when set, at the
    end (`gpu`: the GPU model the probe ran on; `metrics`: the medians; `samples`: what
    TORCHIMAGES_THROUGHPUT_REFERENCE reads, with `gpu`)."""
    figures = pytestconfig.stash[THROUGHPUT_KEY]
    yield figures
    out = settings.path("TORCHIMAGES_THROUGHPUT_OUT")
    if out is not None and figures:
        gpu = pytestconfig.stash[THROUGHPUT_GPU_KEY]
        document = {**gpu, "metrics": throughput.medians(figures), "samples": figures}
        out.write_text(json.dumps({**document, "context": asdict(run_context(pytestconfig))}, indent=2))
