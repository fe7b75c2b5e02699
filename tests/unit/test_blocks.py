"""Golden strings for the generated building blocks, one small test per block (HPCCM style)."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from torchimages import compat, render
from torchimages.planning import plan
from torchimages.planning.resolve import variant_pin

# A jinja TemplateModule: its macros are attributes mypy cannot know.
MACROS: Any = render.jinja_environment(render.DEFAULT_TEMPLATES).get_template("macros.j2").module
TLS = (
    "    if [ -s /run/secrets/cacert ]; then export PIP_CERT=/run/secrets/cacert SSL_CERT_FILE=/run/secrets/cacert "
    "CURL_CA_BUNDLE=/run/secrets/cacert REQUESTS_CA_BUNDLE=/run/secrets/cacert; fi \\\n"
    "    && if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi \\\n"
    "    && export PIP_RETRIES=5 PIP_TIMEOUT=60 \\\n"
)
HASH = "ab" * 32  # a made-up wheel hash
UV_ENV = TLS + (
    "    && if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; "
    "else export UV_NO_CONFIG=1 UV_INDEX_URL=https://download.pytorch.org/whl/cu130; fi \\\n"
    "    && export UV_CACHE_DIR=/home/torch/.cache/uv/cache UV_CREDENTIALS_DIR=/home/torch/.cache/uv/credentials "
    "TMPDIR=/home/torch/.cache/uv/tmp UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_HTTP_RETRIES=5 "
    "UV_HTTP_TIMEOUT=60 RUST_LOG=uv_client::retry=debug \\\n"
    '    && mkdir -p "$TMPDIR" \\\n'
)
UV_ITSELF = (
    "    && uv=/home/torch/.cache/uv/uv-0.13.8-$(uname -m) \\\n"
    f'    && if [ ! -x "$uv/bin/uv" ]; then echo \'uv==0.13.8 --hash=sha256:{HASH}\' > "$uv.$$.txt" \\\n'
    "        && /opt/venv/bin/pip install --no-input --quiet --no-cache-dir --no-deps --only-binary :all: "
    '--require-hashes --target "$uv.$$" -r "$uv.$$.txt" \\\n'
    '        && rm "$uv.$$.txt" && { mv -T "$uv.$$" "$uv" 2>/dev/null || rm -rf "$uv.$$"; }; fi \\\n'
    "    && uv=$uv/bin/uv \\\n"
)
UV = UV_ENV + UV_ITSELF
APT_CA = (
    "if [ -s /var/cache/apt/torchimages-cacert ]; then "
    "echo 'Acquire::https::CAInfo \"/var/cache/apt/torchimages-cacert\";' "
    "> /etc/apt/apt.conf.d/99build-ca; fi \\"
)
UV_MOUNTS = (
    "RUN --mount=type=cache,target=/home/torch/.cache/uv,uid=1000,gid=0 \\\n"
    "    --mount=type=secret,id=cacert,target=/run/secrets/cacert,uid=1000,gid=0 \\\n"
    "    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf,uid=1000,gid=0 \\\n"
    "    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf,uid=1000,gid=0 \\\n"
)
INSTALL = '"$uv" pip install --python /opt/venv/bin/python --compile-bytecode'

# The last command of every step that writes files (reproducible layers, issue 19), for the root (`/`) and the
# venv owner's steps.
CLAMP = (
    "if [ -n \"${{SOURCE_DATE_EPOCH:-}}\" ]; then mounts=$(cut -d' ' -f2 /proc/self/mounts) && "
    'find {paths} -xdev -newer /dev -print0 | {{ grep -zvxF -e "$mounts" || [ $? = 1 ]; }} '
    '| xargs -0r touch --no-dereference --date="@${{SOURCE_DATE_EPOCH}}"; fi'
)
CLAMP_ROOT = CLAMP.format(paths="/")
# Then every file the venv owner's step made gets its group's permissions equal to its owner's (any uid of
# group 0 writes the venv and the home), before its times are clamped.
GROUP_WRITABLE = (
    "find /opt/venv /home/torch -xdev -path /home/torch/.cache/uv -prune -o ! -type l "
    "\\( \\( -perm -u=w ! -perm -g=w \\) -o \\( -perm -u=x ! -perm -g=x \\) \\) -print0 | xargs -0r chmod g=u"
)
CLAMP_VENV = GROUP_WRITABLE + " \\\n    && " + CLAMP.format(paths="/opt/venv /home/torch")


def image(**extra: Any) -> dict[str, Any]:
    """The template context fields these blocks read."""
    return {
        "index_url": "https://download.pytorch.org/whl/cu130",
        "index_by_arch": [],
        "multi_platform": False,
        "uv": compat.Installer("0.13.8", (HASH,)),
        "lock": "",
        "os_packages_file": str(render.OS_PACKAGES_FILE),
        "os_packages_dir": str(render.OS_PACKAGES_FILE.parent),
        **extra,
    }


def block(text: object) -> str:
    return "\n".join(line.rstrip() for line in str(text).splitlines()).strip("\n")


def test_apt_block_uses_cache_mounts_names_only_and_records_the_packages() -> None:
    expected = textwrap.dedent(
        """\
        RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \\
            --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \\
            --mount=type=secret,id=cacert,target=/var/cache/apt/torchimages-cacert \\
            {ca}
            && retry() {{ for try in 1 2 3; do "$@" && return 0; [ "$try" = 3 ] && return 1; \
echo "torchimages: network step failed, retry $try/2 in $((try * 10)) s: $*"; sleep $((try * 10)); done; }} \\
            && set -- \\
                gcc \\
                g++ \\
            && retry apt-get update --error-on=any -o Acquire::Retries=3 \\
            && apt-get install --simulate -y --no-install-recommends "$@" > /dev/null \\
            && retry apt-get install --download-only -o Acquire::Retries=3 -y --no-install-recommends "$@" \\
            && apt-get install -y --no-install-recommends "$@" \\
            && rm -f /etc/apt/apt.conf.d/99build-ca /var/log/dpkg.log /var/log/alternatives.log \
/var/log/apt/history.log /var/log/apt/term.log /var/cache/ldconfig/aux-cache \\
            && mkdir -p /usr/share/torchimages \\
            && dpkg-query -W -f '${{Package}}=${{Version}}\\n' > /usr/share/torchimages/os-packages.txt \\
            && {clamp}"""
    ).format(ca=APT_CA, clamp=CLAMP_ROOT)
    assert block(MACROS.apt_install(image(), ["gcc", "g++"])) == expected


def test_apt_block_purges_before_it_installs() -> None:
    text = block(MACROS.apt_install(image(), ["git"], ["libnccl2", "libnccl-dev"]))
    assert (
        "    && apt-get purge -y --allow-change-held-packages libnccl2 libnccl-dev \\\n"
        "    && retry apt-get update --error-on=any -o Acquire::Retries=3" in text
    )


def test_venv_layers_are_split_nvidia_torch_dependencies_rest() -> None:
    layers = [
        render.VenvLayer("nvidia", ("torch==2.14.1",)),
        render.VenvLayer("torch", ("torch==2.14.1",)),
        render.VenvLayer("torch-deps", ("torch==2.14.1",)),
        render.VenvLayer("rest", ("numpy==2.4.6",)),
    ]
    compile_torch = (
        UV_MOUNTS + UV + "    && printf '%s\\n' \\\n"
        '        "torch==2.14.1" \\\n'
        '    | "$uv" pip compile --python /opt/venv/bin/python --quiet --no-header --no-annotate - \\\n'
    )
    expected = (
        "# Layers: NVIDIA's libraries torch needs (nvidia-*), as torch's own resolution pins them, in 2 layers\n"
        "# of whole wheels by name (the largest alone, none much over 1 GB): engines pull and unpack layers in "
        "parallel, and\n"
        "# the largest layer bounds a pull. Each step resolves the same pins again (no pin file in any layer); a "
        "group torch\n"
        "# pins nothing of installs nothing; the last step takes every other nvidia-* pin and fails if there are "
        "none at all.\n"
        "# Layer: NVIDIA's cudnn.\n"
        + compile_torch
        + "    | { grep -iE '^nvidia[-_.](cudnn)([-_.]cu[0-9]+)?==' || [ $? = 1 ]; } \\\n"
        f"    | xargs -r {INSTALL} --no-deps \\\n"
        "    && rm -f /opt/venv/.lock \\\n"
        f"    && {CLAMP_VENV}\n"
        "# Layer: NVIDIA's other libraries (every other nvidia-* pin).\n"
        + compile_torch
        + "    | { grep -i '^nvidia' || { echo \"torchimages: error: torch's resolution pins no nvidia-* library\" "
        ">&2; exit 1; }; } \\\n"
        "    | { grep -viE '^nvidia[-_.](cudnn)([-_.]cu[0-9]+)?==' || [ $? = 1 ]; } \\\n"
        f"    | xargs -r {INSTALL} --no-deps \\\n"
        "    && rm -f /opt/venv/.lock \\\n"
        f"    && {CLAMP_VENV}\n"
        "# Layer: torch itself.\n" + UV_MOUNTS + UV + f"    && {INSTALL} --no-deps \\\n"
        '        "torch==2.14.1" \\\n'
        "    && rm -f /opt/venv/.lock \\\n"
        f"    && {CLAMP_VENV}\n"
        "# Layer: torch's other dependencies (triton, sympy, ...).\n" + UV_MOUNTS + UV + f"    && {INSTALL} \\\n"
        '        "torch==2.14.1" \\\n'
        "    && rm -f /opt/venv/.lock \\\n"
        f"    && {CLAMP_VENV}\n"
        "# Layer: the remaining pins (companion libraries, numpy).\n" + UV_MOUNTS + UV + f"    && {INSTALL} \\\n"
        '        "numpy==2.4.6" \\\n'
        "    && rm -f /opt/venv/.lock \\\n"
        f"    && {CLAMP_VENV}"
    )
    groups = render.nvidia_groups((("cudnn",),))
    assert block(MACROS.venv_layers(image(venv_layers=layers, nvidia_groups=groups))) == expected


def test_a_layer_whose_pins_differ_by_platform_sets_them_by_targetarch() -> None:
    by_arch = (("amd64", ("torch==2.9.1+cpu",)), ("arm64", ("torch==2.9.1",)))
    layers = [render.VenvLayer("torch", ("torch==2.9.1+cpu",), by_arch)]
    indexes = [("amd64", "https://download.pytorch.org/whl/cpu"), ("arm64", "https://pypi.org/simple")]
    text = block(MACROS.venv_layers(image(venv_layers=layers, index_by_arch=indexes, multi_platform=True)))
    assert (
        '    && case "${TARGETARCH}" in amd64) index=https://download.pytorch.org/whl/cpu ;; '
        "arm64) index=https://pypi.org/simple ;; "
        '*) echo "torchimages: this Dockerfile builds for amd64, arm64, not ${TARGETARCH}" >&2; exit 1 ;; esac \\\n'
        "    && if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; "
        'else export UV_NO_CONFIG=1 UV_INDEX_URL="$index"; fi \\\n'
    ) in text
    assert (
        "    && case \"${TARGETARCH}\" in amd64) set -- 'torch==2.9.1+cpu' ;; arm64) set -- 'torch==2.9.1' ;; "
        '*) echo "torchimages: this Dockerfile builds for amd64, arm64, not ${TARGETARCH}" >&2; exit 1 ;; esac \\\n'
        f"    && {INSTALL} --no-deps \\\n"
        '        "$@" \\\n'
    ) in text
    assert 'torch==2.9.1+cpu" \\' not in text  # no literal pin beside the chosen ones


def test_uv_sets_itself_up_after_the_first_command_and_pip_asks_pypi_without_its_secret() -> None:
    """The venv's own step creates the venv (`first`) where uv's temporary files go, before the venv's pip
    fetches uv; without the pipconf secret pip asks PyPI (uv's home), not the variant's index."""
    expected = UV_ENV + "    && python3.11 -m venv /opt/venv \\\n" + UV_ITSELF
    assert block(MACROS.uv_setup(image(), "python3.11 -m venv /opt/venv")) == expected.strip().removesuffix(" \\")
    assert "PIP_INDEX_URL" not in str(MACROS.tls_setup(image()))


def test_a_lock_file_constrains_every_uv_step_of_a_layer() -> None:
    nvidia = [render.VenvLayer("nvidia", ("t",))]
    groups = render.nvidia_groups((("cudnn",),))
    text = block(MACROS.venv_layers(image(lock="requirements.lock", venv_layers=nvidia, nvidia_groups=groups)))
    assert text.count("    --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \\\n") == 2
    assert text.count("--no-header --no-annotate --constraint /tmp/requirements.lock - \\\n") == 2
    assert text.count("--constraint /tmp/requirements.lock") == 4  # each layer's compile and install


def test_uv_is_pinned_by_the_knowledge_base_and_never_picks_a_torch_backend(rendered: Callable[[str], str]) -> None:
    """uv's version and wheel hashes are the knowledge base's; no step asks uv for a torch backend (`auto`
    sees no driver inside a build and picks CPU wheels): the pins and the variant's index decide."""
    installer = compat.load().installer
    text = rendered("{torch: 2.14.1, cuda: '13.0', os: debian12}")
    assert f"uv=/home/torch/.cache/uv/uv-{installer.version}-$(uname -m)" in text
    assert f"'uv=={installer.version}" + "".join(f" --hash=sha256:{h}" for h in installer.sha256) + "'" in text
    assert "torch-backend" not in text and "UV_TORCH_BACKEND" not in text
    steps = text.count("RUN --mount=type=cache,target=/home/torch/.cache/uv,")
    # the venv step (setuptools), five nvidia-* layers, torch, its dependencies, the rest, devel's toolkit wheels
    assert steps == 10 and text.count("UV_LINK_MODE=copy") == steps
    assert text.count("--compile-bytecode") == steps


@pytest.fixture
def rendered(write_matrix: Callable[[str], Path]) -> Callable[[str], str]:
    def render_one(entry: str) -> str:
        combinations = plan.load(write_matrix(f"matrix:\n  include:\n    - {entry}\n")).combinations
        (text,) = render.render_all(combinations, render.DEFAULT_TEMPLATES).values()
        return text

    return render_one


def test_devel_on_runtime_block(rendered: Callable[[str], str]) -> None:
    text = rendered("{torch: 2.13.0, cuda: cpu, os: debian12}")
    devel = text[text.index("# devel:") :]
    expected_head = textwrap.dedent(
        """\
        # devel: nvcc of the same CUDA as the wheels and extension build tools.
        FROM runtime AS devel
        SHELL ["/bin/bash", "-o", "pipefail", "-c"]
        ARG SOURCE_DATE_EPOCH=1795910400
        USER 0:0
        RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \\"""
    )
    assert devel.startswith(expected_head)
    assert "        git \\\n        make \\\n" in devel
    assert f"os-packages.txt \\\n    && {CLAMP_ROOT}\nUSER 1000:0\n# The toolkit wheels" in devel
    assert '\n    && "$uv" pip install --python /opt/venv/bin/python --compile-bytecode \\\n        "ninja==' in devel


def test_devel_from_a_toolkit_image_copies_the_one_venv(rendered: Callable[[str], str]) -> None:
    text = rendered("{torch: 2.7.0, cuda: '11.8'}")
    expected = "COPY --from=runtime --chown=1000:0 /opt/venv /opt/venv\nENV CUDA_HOME=/usr/local/cuda\nUSER 1000:0\n"
    assert text.count(expected) == 1 and "FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel" in text


def test_pins_take_only_the_variants_wheel(rendered: Callable[[str], str]) -> None:
    kb = compat.load()
    release = kb.release("2.13.0")
    assert release is not None
    assert variant_pin(release, "cpu", "2.13.0") == "==2.13.0+cpu"
    assert variant_pin(release, "cu126", "2.13.0") == "==2.13.0+cu126"
    # PyPI's default build: plain (PyPI) or +cu130 (PyTorch's index), never another variant's wheel
    assert variant_pin(release, "cu130", "2.13.0") == "==2.13.0,!=2.13.0+cpu,!=2.13.0+cu126,!=2.13.0+cu132"
    cu126 = rendered("{torch: 2.13.0, cuda: '12.6'}")
    assert '        "torch==2.13.0+cu126" \\\n' in cu126 and '        "torchvision==0.28.0+cu126" \\\n' in cu126
    assert '        "torchaudio==2.11.1+cu126" \\\n' in cu126  # an older line's last release: this variant's build
    default = rendered("{torch: 2.14.1, cuda: '13.0', os: debian12}")
    assert '        "torch==2.14.1,!=2.14.1+cpu,!=2.14.1+cu126,!=2.14.1+cu132" \\\n' in default
    assert '        "torchvision==0.29.1,!=0.29.1+cpu,!=0.29.1+cu126,!=0.29.1+cu132" \\\n' in default
    # PyPI's plain torchaudio 2.11.1 is one build (2.11.1+cu132) for every torch: even the default is labelled
    assert '        "torchaudio==2.11.1+cu130" \\\n' in default
    assert '        "torch==2.13.0+cpu" \\\n' in rendered("{torch: 2.13.0, cuda: cpu, os: debian12}")


def test_os_packages_are_names_without_versions() -> None:
    for os in compat.load().os.values():
        assert os.packages and all("=" not in name for name in (*os.packages, *os.devel_packages))
        assert {"gcc", "g++", f"python{os.python}-dev"} <= set(os.packages)
    raw = {"provider": "registry", "image": "x", "python": "3.12", "confidence": "V", "packages": {"gcc": "1"}}
    with pytest.raises(ValueError, match="no versions"):
        compat._os("x", raw)


def test_a_changed_upper_pin_leaves_every_lower_layer_unchanged(write_matrix: Callable[[str], Path]) -> None:
    """BuildKit keys a layer by its parent and its command: the commands below the changed pin must be
    byte-identical, so the lower layers stay cached and shared (registries, pulls, the local store)."""
    kb = compat.load()
    newer_numpy = dataclasses.replace(kb, numpy={**kb.numpy, "3.11": "2.3.5"})
    path = write_matrix("matrix:\n  include:\n    - {torch: 2.14.1, cuda: '13.0', os: debian12}\n")
    (before,) = render.render_all(plan.load(path, kb=kb).combinations, render.DEFAULT_TEMPLATES).values()
    (after,) = render.render_all(plan.load(path, kb=newer_numpy).combinations, render.DEFAULT_TEMPLATES).values()
    marker = "# Layer: the remaining pins"
    assert before.index(marker) == after.index(marker)
    assert before[: before.index(marker)] == after[: after.index(marker)]
    assert '"numpy==2.4.6"' in before[before.index(marker) :] and '"numpy==2.3.5"' in after[after.index(marker) :]
