"""A login or a credential in a cache spec (`--cache-from`, `--cache-to`, of build and bake) is refused, exit 2 in
one line naming the option and never saying the login: a cache spec is on the build's command line, in its log
and in BuildKit's request, so a cache's registry is read with `docker login`'s credentials instead (issue 42)."""

from __future__ import annotations

import csv
import string
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.cli.test_hostile_values import GOOD, run
from torchimages.cli import common
from torchimages.engine import CacheSpec
from torchimages.engine.types import reference_login_end
from torchimages.problems import UsageError

SECRET = "S3cr3tPw"
WITH_LOGINS = [
    f"u:{SECRET}@reg.example.org/team/cache:{{tag}}",
    f"type=registry,ref=u:{SECRET}@reg.example.org/team/cache:1",
    f"type=registry,ref=https://u:{SECRET}@reg.example.org/team/cache:1,mode=max",
    f"type=registry,ref=u:pa/{SECRET}@reg.example.org:5000/cache:{{tag}}",
    f"type=registry,ref=u:it's{SECRET}@reg.example.org/cache:1",
    f"type=registry,ref=u:{SECRET}@x@reg.example.org/cache:1",
    f"ghp_{SECRET}@ghcr.io/org/cache:{{tag}}",
    f"type=registry,ref=u:{SECRET}@reg.example.org/cache@sha256:{'0' * 64}",
    f"type=s3,region=eu-west-1,bucket=b,endpoint_url=http://u:{SECRET}@minio.example:9000",
    f"type=s3,region=eu-west-1,bucket=b,secret_access_key={SECRET}",
    f"type=s3,region=eu-west-1,bucket=b,session_token={SECRET}",
    f"type=gha,scope=x,token={SECRET}",
    f"type=gha,scope=x,ghtoken=ghp_{SECRET}",
    f"type=registry,ref=u:{SECRET}@reg.example.org/cache:1,broken",
]
WITHOUT_LOGINS = [
    "reg.example.org/team/cache:{tag}",
    "type=registry,ref=127.0.0.1:5000/t/pytorch:{tag},mode=max",
    f"reg.example.org/cache@sha256:{'0' * 64}",
    f"reg.example.org/cache:1@sha256:{'0' * 64}",
    "type=s3,region=eu-west-1,bucket=b,endpoint_url=http://minio.example/p@th",
    "type=gha,scope={tag},mode=max",
    "type=inline",
]


@pytest.mark.parametrize("text", WITH_LOGINS)
def test_a_login_in_a_cache_spec_is_refused_without_saying_it(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-from", [text], "{target}")
    message = str(refused.value)
    assert message.startswith("--cache-from: '") and "\n" not in message
    assert SECRET not in message
    assert "docker login" in message or "environment" in message


@pytest.mark.parametrize("text", WITHOUT_LOGINS)
def test_a_cache_spec_without_a_login_is_taken(text: str) -> None:
    assert common.cache_specs("--cache-to", [text]) == (CacheSpec.parse(text),)


def test_the_refusal_says_what_to_do_and_what_it_refused() -> None:
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-to", [f"type=registry,ref=builder:{SECRET}@reg.example.org/c:1,mode=max"])
    assert str(refused.value) == (
        "--cache-to: 'type=registry,ref=reg.example.org/c:1,mode=max': the reference holds a login "
        "(USER:PASSWORD@ before the registry's host), and the build's command line (its log, the process list) "
        "and BuildKit's request would hold it: log in with `docker login REGISTRY` instead (a cache's registry "
        "is read with the engine's logins) and name the cache without it"
    )


@pytest.mark.parametrize(
    ("ref", "end"),
    [
        ("u:p@reg.example.org/c", 3),
        ("u:p@ss@reg.example.org/c", 6),  # the first '@' a host and a repository follow, as values.py reads it
        ("tok@ghcr.io/c:1", 3),
        (f"reg.example.org/c@sha256:{'0' * 64}", -1),
        ("reg.example.org/c@latest", -1),  # a wrong digest, not a login: the reference's own refusal says so
        ("reg.example.org/c:{tag}", -1),
    ],
)
def test_a_reference_s_login_ends_at_the_first_at_a_registry_follows(ref: str, end: int) -> None:
    assert reference_login_end(ref) == end


PRINTABLE = "".join(c for c in string.printable if not c.isspace() and c not in ",=")  # a spec's own separators


@given(
    st.text(st.sampled_from([c for c in PRINTABLE if c not in "/:@"]), min_size=1, max_size=12),
    st.text(st.sampled_from(PRINTABLE), min_size=0, max_size=20),
    st.sampled_from(["", "https://", "http://"]),
)
def test_any_password_in_a_cache_reference_is_refused_and_never_said(user: str, password: str, scheme: str) -> None:
    text = f"type=registry,ref={scheme}{user}:{SECRET}{password}@reg.example.org/team/cache:{{tag}}"
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-from", [text])
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("command", ["build", "bake"])
@pytest.mark.parametrize("option", ["--cache-from", "--cache-to"])
def test_build_and_bake_refuse_it_with_exit_2_in_one_line(
    command: str, option: str, write_matrix: Callable[[str], Path], tmp_path: Path
) -> None:
    matrix = str(write_matrix(GOOD))
    where = ["--log-dir", str(tmp_path / "logs")] if command == "build" else ["--secrets-dir", str(tmp_path / "s")]
    spec = f"type=registry,ref=u:{SECRET}@reg.example.org/c:1"
    code, out, err = run([command, "--matrix", matrix, *where, f"{option}={spec}", "*"])
    assert code == 2 and out == "", err
    assert f"error: {option}: 'type=registry,ref=reg.example.org/c:1': the reference holds a login" in err
    assert SECRET not in err and "Traceback" not in err
    assert not (tmp_path / "logs").exists() and not (tmp_path / "s").exists()


def test_the_setting_is_refused_the_same_way(write_matrix: Callable[[str], Path], tmp_path: Path) -> None:
    matrix = str(write_matrix(GOOD))
    environ = {"TORCHIMAGES_CACHE_FROM": f"u:{SECRET}@reg.example.org/c:{{tag}}"}
    code, _, err = run(["build", "--matrix", matrix, "--log-dir", str(tmp_path / "logs"), "*"], environ)
    assert code == 2 and "--cache-from: 'type=registry,ref=reg.example.org/c:{tag}'" in err, err
    assert SECRET not in err


@pytest.mark.parametrize("text", [f"u:{SECRET}@reg.example.org:5000", f"type=registry,ref=u:{SECRET}@reg.example.org"])
def test_a_reference_refused_for_another_reason_never_says_its_login(text: str) -> None:
    """No repository after the host: not read as a login, refused by the reference's grammar, the login hidden."""
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-from", [text])
    assert "not an image reference" in str(refused.value) and SECRET not in str(refused.value)


# --- keys in any case: buildx lower-cases a cache spec's keys (outside review) ---------------------------------


def any_case(draw: st.DrawFn, word: str) -> str:
    """`word` with each letter's case drawn."""
    return "".join(draw(st.sampled_from([c.lower(), c.upper()])) for c in word)


@st.composite
def credential_specs(draw: st.DrawFn) -> str:
    which = draw(st.sampled_from(["secret_access_key", "session_token", "token", "ghtoken", "ref"]))
    key = any_case(draw, which)
    if which == "ref":
        return f"type=registry,{key}=u:{SECRET}@reg.example.org/team/cache:1"
    return f"type=s3,region=eu-west-1,bucket=b,{key}={SECRET}"


@given(credential_specs())
def test_a_credential_key_in_any_case_is_refused_without_saying_it(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-from", [text])
    assert SECRET not in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "text",
    [
        f"type=gha,TOKEN=ghs_{SECRET}",
        f"type=s3,region=us,bucket=b,SECRET_ACCESS_KEY={SECRET}",
        f"type=s3,region=us,bucket=b,Session_Token={SECRET}",
        f"type=registry,REF=user:{SECRET}@reg.example/repo",
        f"type=registry,ref=localhost:5000/x,REF=user:{SECRET}@reg.example/repo",
        f"type=registry,Ref=ghp_{SECRET}@ghcr.io/org/cache:1",
    ],
)
def test_the_reviewers_upper_case_credentials_are_refused(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-to", [text])
    assert SECRET not in str(refused.value)
    assert "is a credential" in str(refused.value) or "holds a login" in str(refused.value)


@pytest.mark.parametrize(
    "text", ["type=registry,ref=reg.example.org/a:1,REF=reg.example.org/b:1", "type=inline,TYPE=registry"]
)
def test_a_key_given_twice_in_any_case_is_refused(text: str) -> None:
    with pytest.raises(UsageError, match="is given twice"):
        common.cache_specs("--cache-to", [text])


def test_an_upper_case_key_reads_as_buildx_reads_it() -> None:
    assert CacheSpec.parse("TYPE=registry,REF=reg.example.org/c:{tag}") == CacheSpec.parse(
        "type=registry,ref=reg.example.org/c:{tag}"
    )


# Read as buildx reads it: CSV (csvvalue.Fields, util/buildflags/cache.go), then keys lower-cased (outside attack, 2)

QUOTED = [
    f'type=s3,region=x,bucket=b,"secret_access_key={SECRET}"',
    f'type=gha,"token=ghs_{SECRET}"',
    f'type=registry,ref=reg.example/r:c,"ref=bob:{SECRET}@reg.example/r:c"',
    f'type=gha,"ghtoken=ghp_{SECRET}"',
    '"type=registry","ref=reg.example/r:c"',
    f'"bob:{SECRET}@reg.example/r:c"',
]


@pytest.mark.parametrize("text", QUOTED)
def test_a_quoted_field_is_refused_in_one_line_without_saying_the_spec(text: str) -> None:
    with pytest.raises(UsageError) as refused:
        common.cache_specs("--cache-to", [text])
    message = str(refused.value)
    assert "double quote" in message and "\n" not in message and SECRET not in message


def buildx_reads(text: str) -> dict[str, str]:
    """A spec's fields as buildx reads them (a quoted field is one field; keys lower-cased; the last one wins)."""
    if "=" not in text:
        text = f"type=registry,ref={text}"
    (fields,) = list(csv.reader([text]))
    return {key.lower(): value for key, _, value in (field.partition("=") for field in fields)}


FIELD_VALUES = st.text(alphabet=string.ascii_letters + string.digits + ':/@.,="-_{}', min_size=1, max_size=24)


@st.composite
def quoted_specs(draw: st.DrawFn) -> str:
    """`type=...` and fields, any of them (or none) quoted as CSV quotes ("" for a quote inside)."""
    kind = draw(st.sampled_from(["registry", "s3", "gha", "inline"]))
    keys = ["ref", "mode", "scope", "bucket", "secret_access_key", "session_token", "token", "ghtoken", "url"]
    fields = [f"type={kind}"]
    for _ in range(draw(st.integers(0, 4))):
        key = any_case(draw, draw(st.sampled_from(keys)))
        value = draw(st.one_of(FIELD_VALUES, st.just(f"bob:{SECRET}@reg.example.org/r:c"), st.just("reg.example/r:c")))
        fields.append(f"{key}={value}")
    if draw(st.booleans()):
        draw(st.randoms()).shuffle(fields)
    shown = ['"' + field.replace('"', '""') + '"' if draw(st.booleans()) or '"' in field else field for field in fields]
    return ",".join(shown)


@given(quoted_specs())
def test_a_spec_taken_is_the_one_buildx_reads_and_holds_no_credential(text: str) -> None:
    try:
        spec = CacheSpec.parse(text, ("{target}",))
    except ValueError as exc:
        assert SECRET not in str(exc)
        return
    read = buildx_reads(text)
    assert read == {"type": spec.type, **dict(spec.attrs)}, (text, spec)
    assert not set(read) & {"secret_access_key", "session_token", "token", "ghtoken"}
    assert SECRET not in read.get("ref", "")


@pytest.mark.parametrize(
    "text",
    [f"type=registry,ref=u:{SECRET}@reg.example.org:5000", f"u:{SECRET}@reg.example.org:5000", f"u:{SECRET}@reg"],
)
def test_a_login_before_a_host_without_a_repository_is_no_reference_and_not_said(text: str) -> None:
    """No `/` after the host: no login by the reference's grammar (reference_login_end), so the reference's own
    check refuses it, and says it without the password."""
    with pytest.raises(ValueError, match="not an image reference") as refused:
        CacheSpec.parse(text)
    assert SECRET not in str(refused.value)
