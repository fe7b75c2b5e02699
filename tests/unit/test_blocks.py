"""Golden strings for the generated building blocks, one small test per block (HPCCM style): the Dockerfile's
instructions (templates/macros.j2) and the step scripts they run (templates/steps/), and the step scripts' own
behaviour where it runs without root."""

from __future__ import annotations

import dataclasses
import subprocess
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
HASH = "ab" * 32  # a made-up wheel hash
STEPS_MOUNT = "--mount=type=bind,source=steps,target=/mnt"
UV_RUN = (
    "RUN --mount=type=cache,target=/home/torch/.cache/uv,uid=1000,gid=0 --mount=type=secret,id=cacert,uid=1000 \\\n"
    f"    --mount=type=secret,id=pipconf,uid=1000 --mount=type=secret,id=uvconf,uid=1000 {STEPS_MOUNT} \\\n"
)
APT_RUN = (
    "RUN --mount=type=cache,target=/var/cache/apt,sharing=locked "
    "--mount=type=cache,target=/var/lib/apt/lists,sharing=locked \\\n"
    "    --mount=type=secret,id=cacert,target=/var/cache/apt/torchimages-cacert "
    f"--mount=type=secret,id=aptauth,target=/var/cache/apt/torchimages-auth.conf {STEPS_MOUNT} \\\n"
)
# The last command of every step that writes files (reproducible layers, issue 19): common.sh's clamp.
CLAMP = (
    '    find "$@" -xdev -newer /dev -print0 | { grep -zvxF -e "$mounts" || [ $? = 1 ]; } \\\n'
    '        | xargs -0r touch --no-dereference --date="@${SOURCE_DATE_EPOCH}"\n'
)
# Then every file the venv owner's step made gets its group's permissions equal to its owner's (any uid of
# group 0 writes the venv and the home), before its times are clamped.
GROUP_WRITABLE = (
    "    find /opt/venv /home/torch -xdev -path /home/torch/.cache/uv -prune -o ! -type l \\\n"
    "        \\( \\( -perm -u=w ! -perm -g=w \\) -o \\( -perm -u=x ! -perm -g=x \\) \\) -print0 | xargs -0r chmod g=u\n"
    "    clamp /opt/venv /home/torch\n"
)


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
        "source_date_epoch": 1795910400,
        "environment": {},
        **extra,
    }


def block(text: object) -> str:
    return "\n".join(line.rstrip() for line in str(text).splitlines()).strip("\n")


def step(name: str, **extra: Any) -> str:
    """A step script rendered for `image(**extra)`."""
    template = render.jinja_environment(render.DEFAULT_TEMPLATES).get_template(f"steps/{name}.j2")
    return template.render(image=image(**extra))


def test_apt_block_names_its_packages_on_one_line_under_cache_mounts() -> None:
    expected = APT_RUN + "    bash /mnt/apt-install.sh gcc g++"
    assert block(MACROS.apt_run(["gcc", "g++"])) == expected
    purging = block(MACROS.apt_run(["git"], ["libnccl2", "libnccl-dev"]))
    assert purging.endswith("bash /mnt/apt-install.sh --purge libnccl2 --purge libnccl-dev git")


def test_apt_step_retries_the_network_only_purges_first_and_records_the_packages() -> None:
    script = step("apt-install.sh")
    body = script[script.index("retry() {") :]
    assert body == textwrap.dedent(
        """\
        retry() {
            for try in 1 2 3; do
                "$@" && return 0
                [ "$try" = 3 ] && return 1
                echo "torchimages: network step failed, retry $try/2 in $((try * 10)) s: $*"
                sleep $((try * 10))
            done
        }
        # shellcheck disable=SC2086 # package names, one word each
        if [ -n "$purge" ]; then apt-get purge -y --allow-change-held-packages $purge; fi
        retry apt-get update "${auth[@]}" --error-on=any -o Acquire::Retries=3
        apt-get install --simulate -y --no-install-recommends "$@" > /dev/null
        retry apt-get install "${auth[@]}" --download-only -o Acquire::Retries=3 -y --no-install-recommends "$@"
        apt-get install -y --no-install-recommends "$@"
        # Every installed package (the base's too) whose candidate <codename>-security carries is upgraded to that
        # candidate (the same version may be in -updates too); no other package is upgraded and none is removed
        # (--no-remove: a plan that would remove one fails the step). An image rebuilt on an older base holds every
        # security fix published by then (docs/security.md). dist-upgrade's plan lists also what plain upgrade keeps
        # back (a fix that needs a new package); a failed plan fails the step.
        plan=$(apt-get dist-upgrade --simulate)
        mapfile -t security < <(sed -n 's/^Inst \\([^ ]*\\) \\[[^]]*\\] .*-security.*/\\1/p' <<<"$plan")
        if [ -n "${security[*]:-}" ]; then
            retry apt-get install "${auth[@]}" --download-only -o Acquire::Retries=3 -y --no-remove --only-upgrade \\
                "${security[@]}"
            apt-get install -y --no-remove --only-upgrade --no-install-recommends "${security[@]}"
        fi
        rm -f /etc/apt/apt.conf.d/99build-ca /var/log/dpkg.log /var/log/alternatives.log /var/log/apt/history.log \\
            /var/log/apt/term.log /var/cache/ldconfig/aux-cache
        mkdir -p /usr/share/torchimages
        dpkg-query -W -f '${Package}=${Version}\\n' > /usr/share/torchimages/os-packages.txt
        clamp /
        """
    )
    assert "echo 'Acquire::https::CAInfo \"/var/cache/apt/torchimages-cacert\";'" in script
    # the mirror's login (the aptauth secret): apt is pointed at it by an option, so no file of the image names it
    assert "auth=(-o Dir::Etc::netrc=/var/cache/apt/torchimages-auth.conf)" in script


def test_the_common_step_clamps_times_and_makes_the_venv_group_writable() -> None:
    script = step("common.sh")
    assert CLAMP in script and GROUP_WRITABLE in script
    assert '[ -n "${SOURCE_DATE_EPOCH:-}" ] || return 0' in script


def test_venv_layers_are_split_nvidia_torch_dependencies_rest() -> None:
    layers = [
        render.VenvLayer("nvidia", ("torch==2.14.1",)),
        render.VenvLayer("torch", ("torch==2.14.1",)),
        render.VenvLayer("torch-deps", ("torch==2.14.1",)),
        render.VenvLayer("rest", ("numpy==2.4.6", "torchvision==0.29.1")),
    ]
    expected = (
        "# NVIDIA's libraries torch needs, as torch's own resolution pins them, in 2 layers of whole wheel families\n"
        "# (none much over 1 GB: engines pull and unpack layers in parallel, and the largest layer bounds a pull).\n"
        "# Layer: NVIDIA's cudnn.\n" + UV_RUN + "    bash /mnt/venv.sh nvidia 'cudnn' \"torch==2.14.1\"\n"
        "# Layer: NVIDIA's other libraries (every other nvidia-* pin).\n"
        + UV_RUN
        + "    bash /mnt/venv.sh nvidia-rest 'cudnn' \"torch==2.14.1\"\n"
        "# Layer: torch itself.\n" + UV_RUN + '    bash /mnt/venv.sh install --no-deps "torch==2.14.1"\n'
        "# Layer: torch's other dependencies (triton, sympy, ...).\n"
        + UV_RUN
        + '    bash /mnt/venv.sh install "torch==2.14.1"\n'
        "# Layer: the remaining pins (companion libraries, numpy).\n"
        + UV_RUN
        + '    bash /mnt/venv.sh install "numpy==2.4.6" "torchvision==0.29.1"'
    )
    groups = render.nvidia_groups((("cudnn",),))
    assert block(MACROS.venv_layers(image(venv_layers=layers, nvidia_groups=groups))) == expected


def test_a_layer_whose_pins_differ_by_platform_sets_them_by_targetarch() -> None:
    by_arch = (("amd64", ("torch==2.9.1+cpu",)), ("arm64", ("torch==2.9.1",)))
    layers = [render.VenvLayer("torch", ("torch==2.9.1+cpu",), by_arch)]
    text = block(MACROS.venv_layers(image(venv_layers=layers, multi_platform=True)))
    assert text.endswith(
        "    case \"${TARGETARCH}\" in amd64) set -- 'torch==2.9.1+cpu' ;; arm64) set -- 'torch==2.9.1' ;; "
        '*) echo "torchimages: this Dockerfile builds for amd64, arm64, not ${TARGETARCH}" >&2; exit 1 ;; esac '
        '&& bash /mnt/venv.sh install --no-deps "$@"'
    )
    assert 'torch==2.9.1+cpu"' not in text  # no literal pin beside the chosen ones
    indexes = [("amd64", "https://download.pytorch.org/whl/cpu"), ("arm64", "https://pypi.org/simple")]
    script = step("venv.sh", index_by_arch=indexes, multi_platform=True)
    assert (
        "    local index\n"
        '    case "${TARGETARCH}" in amd64) index=https://download.pytorch.org/whl/cpu ;; '
        "arm64) index=https://pypi.org/simple ;; "
        '*) echo "torchimages: this Dockerfile builds for amd64, arm64, not ${TARGETARCH}" >&2; exit 1 ;; esac\n'
        "    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; "
        'else export UV_NO_CONFIG=1 UV_INDEX_URL="$index"; fi\n'
    ) in script


def test_uv_sets_itself_up_after_the_venv_and_pip_asks_pypi_without_its_secret() -> None:
    """The venv's own step creates the venv where uv's temporary files go, before the venv's pip fetches uv;
    without the pipconf secret pip asks PyPI (uv's home), not the variant's index."""
    script = step("venv.sh")
    assert ('    uv_environment\n    "$python" -m venv /opt/venv\n    uv_itself\n') in script
    assert (
        "    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; "
        "else export UV_NO_CONFIG=1 UV_INDEX_URL=https://download.pytorch.org/whl/cu130; fi\n"
        "    export UV_CACHE_DIR=/home/torch/.cache/uv/cache UV_CREDENTIALS_DIR=/home/torch/.cache/uv/credentials \\\n"
        "        TMPDIR=/home/torch/.cache/uv/tmp UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never UV_HTTP_RETRIES=5 \\\n"
        "        UV_HTTP_TIMEOUT=60 RUST_LOG=uv_client::retry=debug\n"
        '    mkdir -p "$TMPDIR"\n'
    ) in script
    assert (
        f"        echo 'uv==0.13.8 --hash=sha256:{HASH}' > \"$uv.$$.txt\"\n"
        "        /opt/venv/bin/pip install --no-input --quiet --no-cache-dir --no-deps --only-binary :all: "
        "--require-hashes \\\n"
    ) in script
    assert "PIP_INDEX_URL" not in script


def test_a_lock_file_is_mounted_on_every_uv_step_and_constrains_each_uv_command() -> None:
    nvidia = [render.VenvLayer("nvidia", ("t",))]
    groups = render.nvidia_groups((("cudnn",),))
    text = block(MACROS.venv_layers(image(lock="requirements.lock", venv_layers=nvidia, nvidia_groups=groups)))
    assert (
        text.count(f"{STEPS_MOUNT} --mount=type=bind,source=requirements.lock,target=/tmp/requirements.lock \\\n") == 2
    )
    script = step("venv.sh", lock="requirements.lock")
    assert script.count("--constraint /tmp/requirements.lock") == 4  # install, compile, and each nvidia install
    assert "--constraint" not in step("venv.sh")
    assert "touch /run/secrets/cacert /run/secrets/pipconf /run/secrets/uvconf /tmp/requirements.lock\n" in step(
        "add-user.sh", lock="requirements.lock"
    )


def test_uv_is_pinned_by_the_knowledge_base_and_never_picks_a_torch_backend(
    rendered_files: Callable[[str], dict[str, str]],
) -> None:
    """uv's version and wheel hashes are the knowledge base's; no step asks uv for a torch backend (`auto`
    sees no driver inside a build and picks CPU wheels): the pins and the variant's index decide."""
    installer = compat.load().installer
    files = rendered_files("{torch: 2.14.1, cuda: '13.0', os: debian12}")
    text = next(v for k, v in files.items() if k.endswith("/Dockerfile"))
    script = next(v for k, v in files.items() if k.endswith("/steps/venv.sh"))
    assert f"uv=/home/torch/.cache/uv/uv-{installer.version}-$(uname -m)" in script
    assert f"'uv=={installer.version}" + "".join(f" --hash=sha256:{h}" for h in installer.sha256) + "'" in script
    commands = "\n".join(line for line in (text + script).splitlines() if not line.lstrip().startswith("#"))
    assert "torch-backend" not in commands and "UV_TORCH_BACKEND" not in commands
    steps = text.count("RUN --mount=type=cache,target=/home/torch/.cache/uv,")
    # the venv step (setuptools), five nvidia-* layers, torch, its dependencies, the rest, devel's toolkit wheels
    assert (
        steps
        == 10
        == text.count("bash /mnt/venv.sh create")
        + text.count("bash /mnt/venv.sh install")
        + text.count("bash /mnt/venv.sh nvidia")
    )


@pytest.fixture
def rendered_files(write_matrix: Callable[[str], Path]) -> Callable[[str], dict[str, str]]:
    def render_one(entry: str) -> dict[str, str]:
        combinations = plan.load(write_matrix(f"matrix:\n  include:\n    - {entry}\n")).combinations
        return render.render_all(combinations, render.DEFAULT_TEMPLATES)

    return render_one


@pytest.fixture
def rendered(rendered_files: Callable[[str], dict[str, str]]) -> Callable[[str], str]:
    def dockerfile(entry: str) -> str:
        return next(v for k, v in rendered_files(entry).items() if k.endswith("/Dockerfile"))

    return dockerfile


def test_devel_on_runtime_block(rendered: Callable[[str], str]) -> None:
    """devel FROM runtime inherits its shell, environment, user, working folder and command; it writes only the
    labels that differ."""
    text = rendered("{torch: 2.13.0, cuda: cpu, os: debian12}")
    devel = text[text.index("# devel:") :]
    assert devel == (
        "# devel: nvcc of the same CUDA as the wheels and extension build tools.\n"
        "FROM runtime AS devel\n"
        "ARG SOURCE_DATE_EPOCH=1795910400\n"
        "USER 0:0\n"
        f"{APT_RUN}    bash /mnt/apt-install.sh git make\n"
        "USER 1000:0\n"
        "# The toolkit wheels and build tools, into the same venv.\n"
        f'{UV_RUN}    bash /mnt/venv.sh install "ninja==1.13.2"\n'
        "USER 0:0\n"
        "# The constraints file again, devel's own wheels included.\n"
        f"RUN {STEPS_MOUNT} bash /mnt/constraints.sh\n"
        "USER 1000:0\n"
        'LABEL org.opencontainers.image.title="PyTorch 2.13.0 (devel)" io.torchimages.flavor="devel" \\\n'
        f'      io.torchimages.input-digest="{devel_digest(text)}"\n'
    )


def dockerfile_of(rendered: dict[str, str]) -> str:
    (text,) = (v for k, v in rendered.items() if k.endswith("/Dockerfile"))
    return text


def devel_digest(text: str) -> str:
    marker = 'io.torchimages.input-digest="'
    at = text.rindex(marker) + len(marker)
    return text[at : text.index('"', at)]


def test_devel_from_a_toolkit_image_copies_the_one_venv(rendered: Callable[[str], str]) -> None:
    text = rendered("{torch: 2.7.0, cuda: '11.8'}")
    devel = text[text.index("FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel") :]
    assert devel.startswith(
        "FROM nvidia/cuda:11.8.0-devel-ubuntu22.04 AS devel\n"
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\n'
        "ENV CUDA_HOME=/usr/local/cuda DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 "
    )
    assert (
        f"RUN {STEPS_MOUNT} bash /mnt/add-user.sh\n"
        "COPY --from=runtime --chown=1000:0 /opt/venv /opt/venv\nUSER 1000:0\n"
    ) in devel
    assert text.count("COPY --from=runtime") == 1
    # its own environment and every label (nothing is inherited from runtime): the arch list first
    assert '\nENV TORCH_CUDA_ARCH_LIST="3.7;5.0;6.0;6.1;7.0;7.5;8.0;8.6;9.0" PIP_CONSTRAINT=' in devel
    assert devel.count("io.torchimages.") == text[: text.index("# devel:")].count("io.torchimages.")


def test_pins_take_only_the_variants_wheel(rendered: Callable[[str], str]) -> None:
    kb = compat.load()
    release = kb.release("2.13.0")
    assert release is not None
    assert variant_pin(release, "cpu", "2.13.0") == "==2.13.0+cpu"
    assert variant_pin(release, "cu126", "2.13.0") == "==2.13.0+cu126"
    # PyPI's default build: plain (PyPI) or +cu130 (PyTorch's index), never another variant's wheel
    assert variant_pin(release, "cu130", "2.13.0") == "==2.13.0,!=2.13.0+cpu,!=2.13.0+cu126,!=2.13.0+cu132"
    cu126 = rendered("{torch: 2.13.0, cuda: '12.6'}")
    assert ' "torch==2.13.0+cu126"\n' in cu126 and ' "torchvision==0.28.0+cu126" ' in cu126
    assert ' "torchaudio==2.11.1+cu126" ' in cu126  # an older line's last release: this variant's build
    default = rendered("{torch: 2.14.1, cuda: '13.0', os: debian12}")
    assert ' "torch==2.14.1,!=2.14.1+cpu,!=2.14.1+cu126,!=2.14.1+cu132"\n' in default
    assert ' "torchvision==0.29.1,!=0.29.1+cpu,!=0.29.1+cu126,!=0.29.1+cu132" ' in default
    # PyPI's plain torchaudio 2.11.1 is one build (2.11.1+cu132) for every torch: even the default is labelled
    assert ' "torchaudio==2.11.1+cu130" ' in default
    assert ' "torch==2.13.0+cpu"\n' in rendered("{torch: 2.13.0, cuda: cpu, os: debian12}")


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
    before, after = (
        dockerfile_of(render.render_all(plan.load(path, kb=each).combinations, render.DEFAULT_TEMPLATES))
        for each in (kb, newer_numpy)
    )
    marker = "# Layer: the remaining pins"
    assert before.index(marker) == after.index(marker)
    assert before[: before.index(marker)] == after[: after.index(marker)]
    assert '"numpy==2.4.6"' in before[before.index(marker) :] and '"numpy==2.3.5"' in after[after.index(marker) :]


@pytest.mark.parametrize(
    ("script", "args", "said"),
    [
        ("venv.sh", [], "venv.sh: unknown step '' (create, install, nvidia, nvidia-rest, links)"),
        ("venv.sh", ["upgrade", "torch"], "venv.sh: unknown step 'upgrade'"),
        ("venv.sh", ["create"], "venv.sh create: which python"),
        ("venv.sh", ["nvidia"], "venv.sh nvidia: which requirements"),
        ("venv.sh", ["nvidia-rest", "cudnn"], "venv.sh nvidia-rest: which families, which requirements"),
        ("venv.sh", ["install"], "venv.sh install: which requirements"),
        ("venv.sh", ["create", "python3.12", "--pip"], "venv.sh create: --pip which version"),
        ("apt-install.sh", [], "apt-install.sh: no packages given"),
        ("apt-install.sh", ["--purge"], "apt-install.sh: --purge what"),
        ("apt-install.sh", ["--purge", "libnccl2"], "apt-install.sh: no packages given"),
    ],
)
def test_a_step_called_wrongly_says_so_before_it_does_anything(
    tmp_path: Path, script: str, args: list[str], said: str
) -> None:
    """A hand-edited Dockerfile's mistake: the step stops with a line naming it (exit 1 or 2), before any command
    that writes (nvidia's families are asked for before uv is set up, apt's packages before apt runs)."""
    for name in (script, "common.sh"):
        (tmp_path / name).write_text(step(name))
    done = subprocess.run(
        ["bash", str(tmp_path / script), *args],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert not Path("/home/torch").exists() and not Path("/opt/venv").exists()  # nothing outside was written
    assert done.returncode in (1, 2) and said in done.stderr, done
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({script, "common.sh"})
