"""Outside attack 5 on the secrets gate (findings 7 and 8): the forms and paths it missed (a proxy's login without a
scheme, fish's, csh's and pam_env's files, `.env` files, kaggle.json, rclone.conf), and what it found that holds no
secret (a password that is the shell's variable, a placeholder, a plain name read as a token). Debian 12's own copies
of the new paths' files (tcsh 6.24.07-1, fish 3.6.0-3.1+deb12u1, libpam-modules 1.5.2-6+deb12u3) pass."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.unit.security.test_layers import BASE, keys, layer, scan
from torchimages import values
from torchimages.security import leaks

PROXY = b"export http_proxy=bob:hunter2hunter2@proxy.corp:3128\n"

FOUND = [
    # a proxy's login without a scheme (curl and wget take `user:password@host:port`)
    ("home/u/.bashrc", PROXY),
    ("etc/profile.d/proxy.sh", b'export HTTPS_PROXY="bob:hunter2@proxy.corp:3128"\n'),
    ("etc/environment.d/10-proxy.conf", b"all_proxy=bob:hunter2@proxy.corp:1080\n"),
    # fish's
    ("home/u/.config/fish/config.fish", b"set -gx http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("etc/fish/config.fish", b"set -gx https_proxy bob:hunter2@proxy.corp:3128\n"),
    ("etc/fish/conf.d/proxy.fish", b"set -x PIP_INDEX_URL https://bob:hunter2@pypi.corp/simple\n"),
    ("home/u/.config/fish/conf.d/proxy.fish", b"set -gx http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("usr/share/fish/vendor_conf.d/proxy.fish", b"set -gx http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    # csh's and tcsh's
    ("etc/csh.cshrc", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("etc/csh.login", b"setenv http_proxy bob:hunter2@proxy.corp:3128\n"),
    ("etc/csh/cshrc.d/proxy", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("etc/csh/login.d/proxy", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("home/u/.cshrc", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("home/u/.tcshrc", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    ("home/u/.login", b"setenv http_proxy http://bob:hunter2@proxy.corp:3128\n"),
    # pam_env's
    ("etc/security/pam_env.conf", b"http_proxy DEFAULT=http://bob:hunter2@proxy.corp:3128\n"),
    ("etc/security/pam_env.conf", b"https_proxy  DEFAULT=bob:hunter2@proxy.corp:3128\n"),
    ("home/u/.pam_environment", b"http_proxy DEFAULT=http://bob:hunter2@proxy.corp:3128\n"),
    # dotenv files
    ("app/.env", b"PIP_INDEX_URL=https://bob:hunter2hunter2@pypi.corp/simple\n"),
    ("srv/api/.env.production", b"DATABASE_URL=postgres://app:hunter2@db:5432/app\n"),
    ("home/u/project/.env", b"HTTP_PROXY=bob:hunter2@proxy.corp:3128\n"),
    # kaggle.json, rclone.conf
    ("home/u/.kaggle/kaggle.json", b'{"username":"bob","key":"0123456789abcdef0123456789abcdef"}\n'),
    ("home/u/.config/kaggle/kaggle.json", b'{"username": "bob", "key": "0123456789abcdef"}'),
    ("home/u/.config/rclone/rclone.conf", b"[s3]\ntype = s3\naccess_key_id = AKIAX\nsecret_access_key = abcd\n"),
    ("home/u/.config/rclone/rclone.conf", b'[box]\ntype = box\ntoken = {"access_token":"x"}\n'),
    ("home/u/.rclone.conf", b"[sftp]\ntype = sftp\nuser = bob\npass = 3x4mpl3obscured\n"),
    ("etc/rclone.conf", b"[az]\ntype = azureblob\naccount = a\nkey = c2VjcmV0\n"),
    # a real password in a comment is still a leak
    ("home/u/.bashrc", b"# export http_proxy=http://bob:hunter2@proxy.corp:3128\n"),
    ("home/u/.bashrc", b"# old: export http_proxy=bob:hunter2@proxy.corp:3128\n"),
    # a password that holds a variable and more, or a literal placeholder's neighbour
    ("home/u/.bashrc", b"export URL=https://u:${PREFIX}hunter2@git.corp/x\n"),
    ("home/u/.bashrc", b"export URL=https://u:passwords1@git.corp/x\n"),
]


@pytest.mark.parametrize(("name", "content"), FOUND, ids=[f"{n}:{c[:24]!r}" for n, c in FOUND])
def test_a_missed_form_is_found(name: str, content: bytes) -> None:
    assert keys(scan(layer(*BASE), layer((name, content)))) == ["/" + name]


# Debian 12's own files at the new paths: /etc/csh.cshrc and /etc/csh.login (csh, tcsh), /etc/fish/config.fish and
# /usr/share/fish/vendor_conf.d/00debian-profile.fish (fish), and /etc/security/pam_env.conf's lines with a '$',
# '@', ':' or '=' (libpam-modules)
CSH_CSHRC = b"""# /etc/csh.cshrc: system-wide .cshrc file for csh(1) and tcsh(1)

if ($?tcsh && $?prompt) then

	bindkey "\\e[1~" beginning-of-line # Home
	bindkey "\\e[7~" beginning-of-line # Home rxvt
	bindkey "\\e[2~" overwrite-mode    # Ins
	bindkey "\\e[3~" delete-char       # Delete
	bindkey "\\e[4~" end-of-line       # End
	bindkey "\\e[8~" end-of-line       # End rxvt

	set autoexpand
	set autolist
	set prompt = "%U%m%u:%B%~%b%# "
endif

set dir=/etc/csh/cshrc.d
if (-e $dir && `/bin/ls $dir` != "") then
  foreach FILE (`/bin/ls $dir/*`)
    source $FILE;
  end;
endif
"""
CSH_LOGIN = b"""# /etc/csh.login: system-wide .login file for csh(1) and tcsh(1)

# allow for other packages/system admins to customize the shell environment
if (-e /etc/csh/login.d && `/bin/ls /etc/csh/login.d` != "") then
  foreach FILE (`/bin/ls /etc/csh/login.d/*`)
    source $FILE;
  end;
endif
"""
FISH_CONFIG = b"""# Put system-wide fish configuration entries here
# or in .fish files in conf.d/
# Files in conf.d can be overridden by the user
# by files with the same name in $XDG_CONFIG_HOME/fish/conf.d

# This file is run by all fish instances.
# To include configuration only for login shells, use
# if status is-login
#    ...
# end
# To include configuration only for interactive shells, use
# if status is-interactive
#   ...
# end
"""
FISH_DEBIAN_PROFILE = b"""# [Debian] Synchronize default PATH with /etc/profile
if not set -q FISH_UNIT_TESTS_RUNNING
    if status is-login
        if test (/usr/bin/id -u) = 0
            fish_add_path -aP /usr/local/sbin
            fish_add_path -aP /usr/local/bin
            fish_add_path -aP /usr/sbin
            fish_add_path -aP /usr/bin
            fish_add_path -aP /sbin
            fish_add_path -aP /bin
        else
            fish_add_path -aP /usr/local/bin
            fish_add_path -aP /usr/bin
            fish_add_path -aP /bin
            fish_add_path -aP /usr/local/games
            fish_add_path -aP /usr/games
        end
    end
end
"""
PAM_ENV_CONF = b"""# be useful to be set: NNTPSERVER, LESS, PATH, PAGER, MANPAGER .....
# Here is my idea:
# VARIABLE   [DEFAULT=[value]]  [OVERRIDE=[value]]
# using the ${string} syntax and (possibly non-existent) PAM_ITEMs may
# be used in values using the @{string} syntax. Both the $ and @
#REMOTEHOST	DEFAULT=localhost OVERRIDE=@{PAM_RHOST}
#DISPLAY		DEFAULT=${REMOTEHOST}:0.0 OVERRIDE=${DISPLAY}
#PAGER		DEFAULT=less
#MANPAGER	DEFAULT=less
#LESS		DEFAULT="M q e h15 z23 b80"
#NNTPSERVER	DEFAULT=localhost
#PATH		DEFAULT=${HOME}/bin:/usr/local/bin:/bin\\
#:/usr/bin:/usr/local/bin/X11:/usr/bin/X11
#DOLLAR		DEFAULT=\\$
#DOLLARDOLLAR	DEFAULT=	OVERRIDE=\\$${DOLLAR}
#DOLLARPLUS	DEFAULT=\\${REMOTEHOST}${REMOTEHOST}
#ATSIGN		DEFAULT=""	OVERRIDE=\\@
"""

PASSED = [
    ("etc/csh.cshrc", CSH_CSHRC),
    ("etc/csh.login", CSH_LOGIN),
    ("etc/fish/config.fish", FISH_CONFIG),
    ("usr/share/fish/vendor_conf.d/00debian-profile.fish", FISH_DEBIAN_PROFILE),
    ("etc/security/pam_env.conf", PAM_ENV_CONF),
    # a password that is the shell's variable: the secret is not in the file
    ("home/u/.bashrc", b'export PIP_INDEX_URL="https://__token__:${PYPI_TOKEN}@pypi.example.org/simple"\n'),
    ("home/u/.bashrc", b"git clone https://oauth2:$GITLAB_TOKEN@gitlab.example.com/g/r.git\n"),
    ("home/u/.bashrc", b"export http_proxy=http://$PROXY_USER:${PROXY_PASS:-}@proxy.corp:3128\n"),
    ("home/u/.bashrc", b"export http_proxy=$PROXY_USER:$PROXY_PASS@proxy.corp:3128\n"),
    ("home/u/.bashrc", b"export URL=https://u:$(cat /run/secrets/t)@git.corp/x\n"),
    ("home/u/.config/fish/config.fish", b"set -gx URL https://u:{$GL_TOKEN}@gitlab.example.com/x\n"),
    ("etc/csh.cshrc", b"setenv http_proxy http://${PROXY_USER}:${PROXY_PASS}@proxy.corp:3128\n"),
    ("app/.env", b"PIP_INDEX_URL=https://__token__:${PYPI_TOKEN}@pypi.example.org/simple\n"),
    ("etc/environment.d/10-proxy.conf", b"http_proxy=http://u:${PROXY_PASS}@proxy.corp:3128\n"),
    # a plain name as the user alone is no token
    ("home/u/.bashrc", b"export REPO=https://jenkins-build-automation@git.corp.example/org/repo.git\n"),
    ("home/u/.bashrc", b"export REPO=https://build-agent-01-eu-west-2-pool@git.corp.example/r.git\n"),
    # placeholders
    ("home/u/.bashrc", b"# e.g. export http_proxy=http://user:password@proxy:3128\n"),
    ("home/u/.bashrc", b"# export HTTPS_PROXY=http://USER:PASSWORD@proxy.example:3128\n"),
    ("home/u/.bashrc", b"# git clone https://<user>:<pass>@git.example/r.git\n"),
    ("home/u/.bashrc", b"# http_proxy=user:password@proxy:3128\n"),
    ("etc/profile.d/proxy.sh", b"# export http_proxy=http://user:***@proxy:3128\n"),
    # the same in wget's, curl's and conda's files (conda expands `${NAME}`; a literal `$NAME` is no secret either)
    ("etc/wgetrc", b"#http_proxy = http://user:password@proxy.example:18023/\n"),
    ("home/u/.wgetrc", b"https_proxy = http://u:${PROXY_PASS}@proxy.corp:3128/\n"),
    ("home/u/.curlrc", b'# proxy = "http://<user>:<password>@proxy:3128"\n'),
    ("home/u/.condarc", b"channels:\n  - https://u:${CONDA_TOKEN}@conda.corp/main\n"),
    # templates of .env files, and what is near kaggle.json and rclone.conf
    ("app/.env", b"DEBUG=1\nDATABASE_URL=postgres://db:5432/app\n"),
    ("home/u/.kaggle/kaggle.json", b'{"username":"","key":""}'),
    ("home/u/.config/rclone/rclone.conf", b"[local]\ntype = local\nkey_file = /k\n# pass = x\n"),
]


@pytest.mark.parametrize(("name", "content"), PASSED, ids=[f"{n}:{c[:24]!r}" for n, c in PASSED])
def test_what_holds_no_secret_passes(name: str, content: bytes) -> None:
    assert leaks.credential_rule("/" + name) is not None  # judged, not passed for its path
    assert keys(scan(layer(*BASE), layer((name, content)))) == []


@pytest.mark.parametrize("name", ["app/.env.example", "app/.env.sample", "app/.env.template", "app/.env.dist"])
def test_a_env_file_s_template_is_not_judged(name: str) -> None:
    """A template's logins are examples (`.env.example` beside `.env`): the file is not a credentials file."""
    assert leaks.credential_rule("/" + name) is None
    assert leaks.credential_rule("/app/.env.local") is not None


@pytest.mark.parametrize(
    "token",
    [
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        "github_pat_11ABCDEFG0abcdefghijklmnopqrstuvwxyz",
        "glpat-abcdefghij0123456789",
        "xoxb-1234567890-abcdefghijklmnop",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "AKIAIOSFODNN7EXAMPLE",
        "ya29.a0AfH6SMBxxxxxxxxxxxxxxxxxxxxx",
        "0123456789abcdef0123456789abcdef01234567",  # 40 hex: a classic token
        "Zx8kQ2mN4pL6rT1vW3yB",  # 20 random letters and digits
    ],
)
def test_a_token_as_the_user_alone_is_found(token: str) -> None:
    text = f"git clone https://{token}@github.com/o/r\n".encode()
    assert leaks.SHELL_LOGIN.search(text) is not None
    assert values.hide_logins(f"'{token}@ghcr.io/x'") == "'ghcr.io/x'"


WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=2, max_size=12)


@given(st.lists(WORD, min_size=2, max_size=6), st.sampled_from(["-", "_", "."]), st.integers(0, 99))
def test_a_name_of_words_is_no_token(words: list[str], sep: str, number: int) -> None:
    """What a user name looks like (words, a separator, a number with two digits at most: `ci-runner-01`), but
    one that starts with a token's prefix (`sk-aa-aaaaaaaaaa-00`: a prefix and 16 characters is a token, by rule)."""
    name = sep.join([*words, f"{number:02d}"])
    assume(re.match(values.TOKEN_PREFIXES, name) is None)
    assert leaks.SHELL_LOGIN.search(f"export R=https://{name}@git.corp.example/r.git\n".encode()) is None


SHAPES = [b"proxy=", b"proxy=a:", b"proxy=a:b@", b"x_proxy " * 3, b"https://u:$", b"https://u:${", b"a:" * 50 + b"@"]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s[:12].decode())
def test_the_shell_mark_is_searched_in_linear_time(shape: bytes) -> None:
    """Guards complexity: 2 MB of each shape, a fraction of a second when linear."""
    data = shape * (2_000_000 // len(shape))
    started = time.monotonic()
    leaks.SHELL_LOGIN.search(data)
    assert time.monotonic() - started < 5
    started = time.monotonic()
    values.hide_logins(data.decode())
    assert time.monotonic() - started < 5
