"""The CI workflow teams copy (.github/workflows/images.yml): rendered from the plan, committed and checked for
staleness, each image built on its platform's own runner, joined only where every platform is there, signed keyless
by the one job that may ask for an OIDC token, actions pinned by commit, no expression expanded in a script, and
clean by actionlint and zizmor."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.unit.conftest import ROOT
from torchimages import platforms
from torchimages.planning import plan, views, workflow
from torchimages.problems import InputError

Cli = Callable[..., tuple[int, str, str]]
COMMITTED = ROOT / ".github" / "workflows" / "images.yml"
# Two platforms (an index, joined), a bootstrapped base, public tags on ghcr.io.
GHCR_BOTH = """
repository: ghcr.io/team/pytorch
matrix:
  include:
    - {torch: 2.14.1, cuda: '13.0', os: debian12, torchaudio: none, platforms: [linux/amd64, linux/arm64]}
    - {torch: 2.13.0, cuda: cpu, os: debian12, torchvision: none, torchaudio: none}
"""
COMMIT = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def rendered(path: Path) -> str:
    return workflow.render(plan.load(path), path.name)


def jobs(text: str) -> dict[str, Any]:
    found: dict[str, Any] = yaml.safe_load(text)["jobs"]
    return found


def steps(text: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, job in jobs(text).items():
        for step in job["steps"]:
            yield name, step


@pytest.fixture
def ghcr_both(write_matrix: Callable[[str], Path]) -> str:
    return rendered(write_matrix(GHCR_BOTH))


# Committed, and stale when the plan says otherwise


def test_the_committed_workflow_is_the_rendering_of_the_matrix() -> None:
    assert COMMITTED.read_text() == rendered(ROOT / "matrix.yaml"), "stale: run `make workflow` and commit it"


def test_workflow_check_fails_on_a_stale_or_missing_file_and_passes_the_written_one(
    cli: Cli, write_matrix: Callable[[str], Path]
) -> None:
    path = write_matrix(GHCR_BOTH)
    written = path.parent / ".github" / "workflows" / "images.yml"
    code, _, err = cli("workflow", "--matrix", str(path), "--check")
    assert (code, f"stale: {written}") == (1, err.splitlines()[0])
    assert cli("workflow", "--matrix", str(path)) == (0, f"wrote {written}\n", "")
    assert cli("workflow", "--matrix", str(path), "--check")[0] == 0
    written.write_text(written.read_text().replace("ubuntu-24.04-arm", "ubuntu-24.04"))
    assert cli("workflow", "--matrix", str(path), "--check")[0] == 1


def test_workflow_refuses_an_output_that_is_a_folder(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GHCR_BOTH)
    code, _, err = cli("workflow", "--matrix", str(path), "--output", str(path.parent))
    assert code == 2
    assert "is a folder, not a file" in err
    assert len(err.strip().splitlines()) == 1


def test_public_tags_on_this_machines_registry_are_refused(write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GHCR_BOTH.replace("ghcr.io/team", "127.0.0.1:5055/proof"))
    refusal = re.escape("127.0.0.1:5055, a registry of this machine that no runner reaches")
    with pytest.raises(InputError, match=refusal):
        rendered(path)


# The jobs the plan makes: one per combination and platform, on that platform's runner; joins where all are there


def test_each_platforms_images_run_on_that_platforms_own_runner(write_matrix: Callable[[str], Path]) -> None:
    chosen = plan.select(plan.load(write_matrix(GHCR_BOTH)), [])
    assert views.ci_platform_matrix(chosen)["include"] == [
        {
            "combination": "2.13.0-cpu-py3.11-debian12",
            "platform": "linux/amd64",
            "arch": "amd64",
            "runner": "ubuntu-24.04",
            "tags": "2.13.0-cpu-devel 2.13.0-cpu-runtime",
            "bootstrap": "true",
        },
        {
            "combination": "2.14.1-cuda13.0-py3.11-debian12",
            "platform": "linux/amd64",
            "arch": "amd64",
            "runner": "ubuntu-24.04",
            "tags": "2.14.1-cuda13.0-cudnn9-devel-amd64 2.14.1-cuda13.0-cudnn9-runtime-amd64",
            "bootstrap": "true",
        },
        {
            "combination": "2.14.1-cuda13.0-py3.11-debian12",
            "platform": "linux/arm64",
            "arch": "arm64",
            "runner": "ubuntu-24.04-arm",
            "tags": "2.14.1-cuda13.0-cudnn9-devel-arm64 2.14.1-cuda13.0-cudnn9-runtime-arm64",
            "bootstrap": "true",
        },
    ]
    assert set(views.RUNNERS) == set(platforms.PLATFORMS)


def test_a_registry_base_is_not_bootstrapped(write_matrix: Callable[[str], Path]) -> None:
    chosen = plan.select(plan.load(write_matrix("matrix:\n  include:\n    - {torch: 2.7.0, cuda: '11.8'}\n")), [])
    assert [job["bootstrap"] for job in views.ci_platform_matrix(chosen)["include"]] == ["false"]


def test_join_is_asked_only_where_every_platform_is_selected(write_matrix: Callable[[str], Path]) -> None:
    loaded = plan.load(write_matrix(GHCR_BOTH))
    assert views.ci_join_matrix(plan.select(loaded, []))["include"] == [
        {
            "combination": "2.14.1-cuda13.0-py3.11-debian12",
            "tags": "2.14.1-cuda13.0-cudnn9-devel 2.14.1-cuda13.0-cudnn9-runtime",
        }
    ]
    only_arm64 = plan.select(loaded, ["2.14.1-cuda13.0-cudnn9-runtime-arm64"])
    assert views.ci_join_matrix(only_arm64) == {"include": []}
    assert [j["tags"] for j in views.ci_platform_matrix(only_arm64)["include"]] == [
        "2.14.1-cuda13.0-cudnn9-runtime-arm64"
    ]


def test_plan_prints_the_workflows_matrices(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = str(write_matrix(GHCR_BOTH))
    code, out, _ = cli("plan", "--matrix", path, "--format", "github-platforms", "2.14.1")
    assert code == 0
    assert [(j["arch"], j["runner"]) for j in json.loads(out)["include"]] == [
        ("amd64", "ubuntu-24.04"),
        ("arm64", "ubuntu-24.04-arm"),
    ]
    code, out, _ = cli("plan", "--matrix", path, "--format", "github-joins", "2.13.0")
    assert (code, out) == (0, '{"include":[]}\n')


# What the workflow holds to


def test_every_action_is_pinned_by_its_full_commit(ghcr_both: str) -> None:
    uses = [step["uses"] for _, step in steps(ghcr_both) if "uses" in step]
    assert uses
    assert [u for u in uses if not COMMIT.match(u)] == []
    assert {u.split("@")[0] for u in uses} == set(workflow.ACTIONS)


def test_checkout_keeps_no_credentials(ghcr_both: str) -> None:
    checkouts = [step for _, step in steps(ghcr_both) if step.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == len(jobs(ghcr_both)) == 4
    assert all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_no_expression_is_expanded_inside_a_script(ghcr_both: str) -> None:
    scripts = [step["run"] for _, step in steps(ghcr_both) if "run" in step]
    assert len(scripts) >= 8
    assert [s for s in scripts if "${{" in s] == []


def test_only_the_signing_job_may_ask_for_an_oidc_token(ghcr_both: str) -> None:
    document = yaml.safe_load(ghcr_both)
    assert document["permissions"] == {}
    granted = {name: job["permissions"] for name, job in document["jobs"].items()}
    assert granted == {
        "plan": {"contents": "read"},
        "images": {"contents": "read", "packages": "write"},
        "join": {"contents": "read", "packages": "write"},
        "sign": {"contents": "read", "id-token": "write", "packages": "write"},
    }


def test_a_registry_other_than_ghcr_gets_no_packages_permission_beyond_the_temporary_references() -> None:
    granted = {name: job["permissions"] for name, job in jobs(COMMITTED.read_text()).items()}
    assert granted == {
        "plan": {"contents": "read"},
        "images": {"contents": "read", "packages": "write"},
        "join": {"contents": "read"},
        "sign": {"contents": "read", "id-token": "write"},
    }
    logins = [step["with"] for _, step in steps(COMMITTED.read_text()) if "login-action" in step.get("uses", "")]
    assert {(w["registry"], w["username"], w["password"]) for w in logins} == {
        ("ghcr.io", "${{ github.actor }}", "${{ secrets.GITHUB_TOKEN }}"),
        ("docker.io", "${{ secrets.DOCKER_IO_USERNAME }}", "${{ secrets.DOCKER_IO_PASSWORD }}"),
    }


def test_nothing_is_signed_unless_every_image_and_index_passed(ghcr_both: str) -> None:
    sign = jobs(ghcr_both)["sign"]
    assert sign["needs"] == ["plan", "images", "join"]
    assert sign["if"] == (
        "${{ !cancelled() && needs.images.result == 'success' && "
        "(needs.join.result == 'success' || needs.join.result == 'skipped') }}"
    )


def test_images_are_baked_to_temporary_references_then_promoted(ghcr_both: str) -> None:
    (bake,) = [s["run"] for job, s in steps(ghcr_both) if job == "images" and "buildx bake" in s.get("run", "")]
    assert '--temporary-registry "ghcr.io/${OWNER,,}"' in bake
    assert "docker buildx bake --file bake.json --push --metadata-file metadata.json" in bake
    (promote,) = [s["run"] for job, s in steps(ghcr_both) if job == "images" and "promote" in s.get("run", "")]
    assert "--from metadata.json" in promote and "--push" in promote


def test_the_image_jobs_bake_on_the_containerd_store_and_promote_asks_for_the_attestations(ghcr_both: str) -> None:
    """Issue 46: a runner's engine keeps the classic image store; each image job turns on the containerd store
    (where a bake attaches the SBOM and provenance) before anything is baked, and promote is not told to take an
    image without them."""
    runs = [s.get("run", "") for job, s in steps(ghcr_both) if job == "images"]
    (store,) = [i for i, run in enumerate(runs) if "containerd-snapshotter" in run]
    (bake,) = [i for i, run in enumerate(runs) if "torchimages bake" in run]
    assert store < bake
    assert "sudo systemctl restart docker" in runs[store] and "io.containerd.snapshotter.v1" in runs[store]
    assert (
        "busybox-static" in runs[store]
        and "apt-get install --yes --no-install-recommends busybox-static" not in runs[store]
    )
    assert not [run for run in runs if "--allow-unattested" in run]


# The linters (`make lint` runs them too)


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (`make install` installs it from the dev extra)")
    return found


@pytest.mark.parametrize("which", ["committed", "ghcr, two platforms"])
def test_actionlint_and_zizmor_find_nothing(which: str, ghcr_both: str, tmp_path: Path) -> None:
    path = COMMITTED
    if which != "committed":
        path = tmp_path / "images.yml"
        path.write_text(ghcr_both)
    shellcheck = _tool("shellcheck")
    linted = subprocess.run(
        [_tool("actionlint"), "-shellcheck", shellcheck, str(path)], capture_output=True, text=True, timeout=120
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    audited = subprocess.run(
        [_tool("zizmor"), "--offline", "--persona", "pedantic", "--format", "json", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (audited.returncode, json.loads(audited.stdout)) == (0, []), audited.stderr


def test_zizmor_and_actionlint_do_find_a_planted_injection(ghcr_both: str, tmp_path: Path) -> None:
    """The linters can fail here: an input expanded inside a script and an action by tag."""
    path = tmp_path / "images.yml"
    broken = ghcr_both.replace('read -ra selectors <<< "$SELECTOR"', "read -ra selectors <<< ${{ inputs.selector }}")
    path.write_text(re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v6", broken))
    audited = subprocess.run(
        [_tool("zizmor"), "--offline", "--format", "json", str(path)], capture_output=True, text=True, timeout=120
    )
    found = {finding["ident"] for finding in json.loads(audited.stdout)}
    assert {"template-injection", "unpinned-uses"} <= found
    assert audited.returncode != 0


# Secret names: two registries never share one (outside review)


def test_two_registries_whose_logins_read_the_same_secret_are_refused_naming_both() -> None:
    found = [workflow.login("a.b.example"), workflow.login("a-b.example")]
    assert found[0].username == found[1].username == "secrets.A_B_EXAMPLE_USERNAME"
    with pytest.raises(InputError) as refused:
        workflow.distinct_secrets(found)
    message = str(refused.value)
    assert "a.b.example and to a-b.example" in message and "A_B_EXAMPLE_USERNAME" in message
    apart = [workflow.login("ghcr.io"), workflow.login("docker.io"), workflow.login("quay.io")]
    assert workflow.distinct_secrets(apart) == apart


# Every value of the plan's is a quoted YAML scalar: a hostile matrix name reads back as itself (outside review)

NAMES = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp", "Zs", "Co", "Cn", "Cf")), max_size=30)


@given(name=st.one_of(NAMES, st.sampled_from(["prod.yaml #staging", "m: x #y.yaml", "'a\"b'", "*x", "!!int 3", "- a"])))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_hostile_matrix_name_reads_back_as_itself(ghcr_plan: plan.Plan, name: str) -> None:
    assume("${{" not in name)
    text = workflow.render(ghcr_plan, name)
    document = yaml.safe_load(text)
    assert document["env"]["MATRIX"] == name
    assert document["jobs"] == yaml.safe_load(workflow.render(ghcr_plan, "matrix.yaml"))["jobs"]
    logins = [s["with"]["registry"] for _, s in steps(text) if "login-action" in s.get("uses", "")]
    assert logins and all(r == "ghcr.io" for r in logins)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("m\nx.yaml", "holds the unprintable character '\\n'"),
        ("m\rx.yaml", "holds the unprintable character '\\r'"),
        ("m\x1bx.yaml", "holds the unprintable character '\\x1b'"),
        ("m\u2028.yaml", "holds the unprintable character '\\u2028'"),
        ("${{ secrets.TOKEN }}.yaml", "holds `${{`, which GitHub expands as an expression"),
    ],
)
def test_a_matrix_name_no_yaml_value_can_hold_is_refused(ghcr_plan: plan.Plan, name: str, said: str) -> None:
    with pytest.raises(InputError, match=re.escape(said)):
        workflow.render(ghcr_plan, name)


def test_the_cli_refuses_it_with_exit_2_in_one_line(cli: Cli, write_matrix: Callable[[str], Path]) -> None:
    path = write_matrix(GHCR_BOTH)
    hostile = path.with_name("prod\n#x.yaml")
    hostile.write_text(path.read_text())
    code, out, err = cli("workflow", "--matrix", str(hostile), "--output", str(path.parent / "w.yml"))
    assert (code, out) == (2, "")
    assert len(err.strip().splitlines()) == 1 and "the matrix file's name" in err, err
    assert not (path.parent / "w.yml").exists()


@pytest.fixture
def ghcr_plan(write_matrix: Callable[[str], Path]) -> plan.Plan:
    return plan.load(write_matrix(GHCR_BOTH))


# Secret names GitHub can have: [A-Z_][A-Z0-9_]*, never GITHUB_ (outside attack, finding 9)

VALID_SECRET = re.compile(r"[A-Z_][A-Z0-9_]*")
AWKWARD_REGISTRIES = {
    "123456789012.dkr.ecr.us-east-1.amazonaws.com": "REGISTRY_123456789012_DKR_ECR_US_EAST_1_AMAZONAWS_COM",
    "10.1.2.3:5000": "REGISTRY_10_1_2_3_5000",
    "github.example.com": "REGISTRY_GITHUB_EXAMPLE_COM",
    "docker.io": "DOCKER_IO",
}


def _secret_names(text: str) -> set[str]:
    return set(re.findall(r"\$\{\{ secrets\.([^ }]+) \}\}", text))


@pytest.mark.parametrize("domain", list(AWKWARD_REGISTRIES))
def test_each_registry_secret_name_is_one_github_allows(domain: str) -> None:
    found = workflow.login(domain)
    stem = AWKWARD_REGISTRIES[domain]
    assert (found.username, found.password) == (f"secrets.{stem}_USERNAME", f"secrets.{stem}_PASSWORD")


@given(st.from_regex(r"[a-z0-9][a-z0-9._-]{0,30}(:[0-9]{1,5})?", fullmatch=True))
def test_any_host_gives_a_secret_name_github_allows(domain: str) -> None:
    name = workflow.secret_name(domain)
    assert VALID_SECRET.fullmatch(name) and not name.startswith("GITHUB_"), name


@pytest.mark.parametrize(
    "domain", ["123456789012.dkr.ecr.us-east-1.amazonaws.com", "10.1.2.3:5000", "github.example.com"]
)
def test_a_workflow_for_an_awkward_registry_names_valid_secrets_and_actionlint_passes_it(
    domain: str, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    text = rendered(write_matrix(GHCR_BOTH.replace("ghcr.io/team/pytorch", f"{domain}/team/pytorch")))
    names = _secret_names(text) - {"GITHUB_TOKEN"}
    assert names == {f"{AWKWARD_REGISTRIES[domain]}_USERNAME", f"{AWKWARD_REGISTRIES[domain]}_PASSWORD"}
    path = tmp_path / "images.yml"
    path.write_text(text)
    linted = subprocess.run(
        [_tool("actionlint"), "-shellcheck", _tool("shellcheck"), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
