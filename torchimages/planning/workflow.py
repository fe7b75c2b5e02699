"""The GitHub Actions workflow teams copy (.github/workflows/images.yml), rendered from the plan: pure text.

What it takes from the plan: the matrix file and `--bases` its commands repeat, the registries of the public
tags (a login each: ghcr.io by the job's GITHUB_TOKEN, any other by two secrets named after it), whether any
base is bootstrapped (mmdebstrap on the runner), and the runner of each platform (views.RUNNERS). Which images
run is the plan's at run time (`plan --format github-platforms`, `github-joins`), so a selector needs no new
rendering; a change to the matrix that changes one of the above makes the committed file stale.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import jinja2

from torchimages import registry
from torchimages.planning import views
from torchimages.planning.plan import Plan
from torchimages.problems import InputError, Problem

# Where the workflow goes, relative to the matrix's folder (the repository's root in the layout teams copy).
PATH = PurePosixPath(".github/workflows/images.yml")
TEMPLATE = Path(__file__).resolve().parent / "workflow.yml.j2"
GHCR = "ghcr.io"


@dataclass(frozen=True)
class Action:
    """An action the workflow uses, pinned by its full commit (zizmor's unpinned-uses), with the release it is."""

    commit: str
    version: str


# Each commit read from the action's own repository: the commit its release tag names (checked 2026-12-06).
ACTIONS = {
    "actions/checkout": Action("d23441a48e516b6c34aea4fa41551a30e30af803", "v6.1.0"),
    "actions/setup-python": Action("ece7cb06caefa5fff74198d8649806c4678c61a1", "v6.3.0"),
    "actions/upload-artifact": Action("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "docker/login-action": Action("4907a6ddec9925e35a0a9e82d7399ccc52663121", "v4.1.0"),
    "docker/setup-buildx-action": Action("37fe631027851001ddb9b187196cc803df7f5f0e", "v4.3.0"),
    "sigstore/cosign-installer": Action("6f9f17788090df1f26f669e9d70d6ae9567deba6", "v4.1.2"),
}


@dataclass(frozen=True)
class Login:
    """docker/login-action's inputs for one registry of the public tags (expressions, without `${{ }}`)."""

    registry: str
    username: str
    password: str
    secret: bool  # read from the repository's secrets (else the job's own GITHUB_TOKEN)


def login(domain: str) -> Login:
    """ghcr.io by the job's token; any other registry by `<HOST>_USERNAME` and `<HOST>_PASSWORD` secrets
    (`docker.io` -> DOCKER_IO_USERNAME), each character but A-Z and 0-9 read as `_` (secret_name)."""
    if domain == GHCR:
        return Login(GHCR, "github.actor", "secrets.GITHUB_TOKEN", secret=False)
    name = secret_name(domain)
    return Login(domain, f"secrets.{name}_USERNAME", f"secrets.{name}_PASSWORD", secret=True)


SECRET_PREFIX = "REGISTRY_"


def secret_name(domain: str) -> str:
    """The stem of a registry's secrets: its host (and port) upper-cased, each character but A-Z and 0-9 as `_`;
    `REGISTRY_` before it where GitHub would refuse the name (a secret's name starts with a letter or `_`,
    never with GITHUB_): `123456789012.dkr.ecr...` -> REGISTRY_123456789012_DKR_ECR_..., `github.example.com`
    -> REGISTRY_GITHUB_EXAMPLE_COM."""
    name = re.sub(r"[^A-Z0-9]", "_", domain.upper())
    if not re.match(r"[A-Z_]", name) or name.startswith("GITHUB_"):
        name = SECRET_PREFIX + name
    return name


def logins(plan: Plan) -> list[Login]:
    """A login per registry of the plan's public tags, in plan order; InputError for a loopback registry (this
    machine's: no runner reaches it)."""
    domains = list(dict.fromkeys(registry.parse(image.reference).domain for _, image in plan.images()))
    local = [d for d in domains if registry.is_loopback(d)]
    if local:
        message = f"the public tags go to {local[0]}, a registry of this machine that no runner reaches"
        raise InputError([Problem(message + ": give the matrix a `repository` of a registry the runners reach")])
    return distinct_secrets([login(d) for d in domains])


def distinct_secrets(found: list[Login]) -> list[Login]:
    """`found`, or InputError when two registries' logins read the same secrets (`a.b` and `a-b` both read
    A_B_USERNAME): the job would send one registry's credentials to the other. (A matrix has one repository
    today; this holds the line for the day the tags go to several.)"""
    by_secret: dict[str, str] = {}
    for each in found:
        if each.secret and (other := by_secret.setdefault(each.username, each.registry)) != each.registry:
            name = each.username.removeprefix("secrets.")
            message = (
                f"the public tags go to {other} and to {each.registry}, whose logins are both read from the "
                f"secret {name} (and its _PASSWORD): one registry's credentials would be sent to the other"
            )
            raise InputError([Problem(message + ": give the matrix repositories of registries named apart")])
    return found


def renderable(what: str, value: str) -> str:
    """`value`, or InputError when no YAML scalar (nor comment) of the workflow can hold it as it is: a line break
    or another unprintable character, or `${{` (GitHub would expand it as an expression, even quoted)."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        problem = f"holds the unprintable character {bad!r}"
    elif "${{" in value:
        problem = "holds `${{`, which GitHub expands as an expression"
    else:
        return value
    raise InputError([Problem(f"{what} {json.dumps(value)} {problem}: the workflow cannot name it; rename it")])


def yaml_scalar(value: object) -> str:
    """A YAML double-quoted scalar of `value` (JSON's string syntax is YAML's): `#`, `: `, quotes stay its own."""
    return json.dumps(renderable("a value of the workflow", str(value)), ensure_ascii=False)


def context(plan: Plan, matrix: str, bases: str | None = None) -> dict[str, object]:
    """The template's view: `matrix` as the workflow's commands name it, `bases` the `--bases` they repeat."""
    found = logins(plan)
    return {
        "matrix": renderable("the matrix file's name", matrix),
        "bases": f" --bases {shlex.quote(renderable('--bases', bases))}" if bases else "",
        "logins": found,
        "ghcr_public": any(login.registry == GHCR for login in found),
        "bootstrap": any(views.bootstrapped(c) for c in plan.combinations),
        "runners": ", ".join(f"{platform} on {runner}" for platform, runner in views.RUNNERS.items()),
        "actions": ACTIONS,
    }


def environment() -> jinja2.Environment:
    """A strict Jinja2 environment whose delimiters leave GitHub's `${{ }}` and bash's `${#...}` as they are."""
    found = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        variable_start_string="{=",
        variable_end_string="=}",
        comment_start_string="{##",
        comment_end_string="##}",
    )
    found.filters["yaml"] = yaml_scalar  # every value of the plan's that lands in a YAML scalar goes through it
    return found


def render(plan: Plan, matrix: str, bases: str | None = None) -> str:
    """The workflow's text: no trailing blanks, one newline at the end."""
    text = environment().get_template(TEMPLATE.name).render(**context(plan, matrix, bases))
    return "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"
