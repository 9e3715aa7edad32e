"""The one masking of credentials (planner.common.secrets) and the loopback check
(planner.common.net): every form a user writes a secret in, and every form of this machine."""

from __future__ import annotations

import pytest

from planner.common.net import is_loopback_host
from planner.common.secrets import MASK, redact_text, redact_url, scrub, url_secrets

SECRET = "Zq7-unique-s3cr3t"

# Each URL holds SECRET as a credential; the redacted text keeps what names the place.
URLS = [
    (f"postgresql://planner:{SECRET}@db.example:5432/fleet", "postgresql://planner:***@db.example:5432/fleet"),
    (f"postgresql+psycopg://planner:{SECRET}@db.example/fleet", "postgresql+psycopg://planner:***@db.example/fleet"),
    (f"postgresql://db.example/fleet?user=u&password={SECRET}", "postgresql://db.example/fleet?user=u&password=***"),
    (f"postgresql://u@db.example/fleet?sslpassword={SECRET}&sslmode=require", "postgresql://u@db.example/fleet?sslpassword=***&sslmode=require"),
    (f"postgresql://planner:p@{SECRET}@db.example/fleet", "postgresql://***@db.example/fleet"),  # '@' unencoded
    (f"postgresql://planner:p%40{SECRET}@db.example/fleet", "postgresql://planner:***@db.example/fleet"),
    (f"postgresql://planner:a/b@{SECRET}@db.example/fleet", "postgresql://***@db.example/fleet"),
    (f"postgresql://planner:{SECRET}@db.example:notaport/fleet", "postgresql://planner:***@db.example:notaport/fleet"),
    (f"host=db.example port=5432 password={SECRET}", "host=db.example port=5432 password=***"),
    (f"host=db.example password='{SECRET} x' user=u", "host=db.example password=*** user=u"),
    (f"::not a url:{SECRET}@somewhere", "***@somewhere"),
    (f"http://user:{SECRET}@gpu-box:8000", "http://user:***@gpu-box:8000"),
    (f"https://{SECRET}@gpu-box/v1", "https://***@gpu-box/v1"),  # a token as the user name
    (f"http://gpu-box/?api_key={SECRET}", "http://gpu-box/?api_key=***"),
    (f"http://gpu-box/v1?model=m&token={SECRET}", "http://gpu-box/v1?model=m&token=***"),
    (f"http://gpu-box/v1?access_token={SECRET}#frag", "http://gpu-box/v1?access_token=***#frag"),
    (f"http://gpu-box/v1?key={SECRET}&secret={SECRET}", "http://gpu-box/v1?key=***&secret=***"),
    (f"https://bucket.example/x?X-Amz-Signature={SECRET}&sig={SECRET}", "https://bucket.example/x?X-Amz-Signature=***&sig=***"),
    (f"http://gpu-box/?api%5Fkey={SECRET}", "http://gpu-box/?api%5Fkey=***"),  # an encoded name
    (f"http://user:a?b{SECRET}@gpu-box/x", "http://***@gpu-box/x"),  # '?' in the password
    (f"http://user:a#b{SECRET}@gpu-box/x", "http://***@gpu-box/x"),  # '#' in the password
    (f"http://user:{SECRET}", "http://user:***"),  # no host: the "port" is the password
    (f"http://[::1:{SECRET}@gpu-box", "http://***@gpu-box"),  # not a URL httpx reads
]  # fmt: skip


@pytest.mark.parametrize(("url", "expected"), URLS)
def test_redact_url_masks_every_credential(url: str, expected: str) -> None:
    redacted = redact_url(url)
    assert SECRET not in redacted
    assert redacted == expected


# The password as a library reads it, where that is not SECRET as written.
READ_AS = {
    f"postgresql://planner:p%40{SECRET}@db.example/fleet": f"p@{SECRET}",
    f"host=db.example password='{SECRET} x' user=u": f"{SECRET} x",
    f"http://user:a?b{SECRET}@gpu-box/x": f"a?b{SECRET}",
    f"http://user:a#b{SECRET}@gpu-box/x": f"a#b{SECRET}",
    f"http://[::1:{SECRET}@gpu-box": f":1:{SECRET}",
}


@pytest.mark.parametrize(("url", "_expected"), URLS)
def test_url_secrets_finds_what_scrub_removes(url: str, _expected: str) -> None:
    password = READ_AS.get(url, SECRET)
    message = f"the driver said: could not log in with {password} (connection refused)"
    assert SECRET not in scrub(message, url_secrets(url))


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:////data/me@corp/planner.db",  # an '@' in a folder's name is no credential
        "sqlite:///relative.db",
        "postgresql://planner@db.example/fleet",  # a user name alone is kept
        "http://127.0.0.1:8000",
        "http://[::1]:8000/v1",
        "http://gpu-box:8000/models/m@v1",
        "http://gpu-box/v1?max_tokens=5&model=m",
    ],
)
def test_what_holds_no_credential_is_kept(url: str) -> None:
    assert redact_url(url) == url
    assert url_secrets(url) == [] or "sqlite" not in url


def test_redact_url_escapes_control_characters_and_cuts() -> None:
    assert redact_url("sqlite:///a\nb.db") == "sqlite:///a\\nb.db"
    assert redact_url("sqlite:///" + "x" * 300, limit=50).endswith("…")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Authorization: Bearer {SECRET}", "Authorization: Bearer ***"),
        (f"authorization: basic {SECRET}", "authorization: basic ***"),
        (f"Proxy-Authorization: {SECRET}", "Proxy-Authorization: ***"),
        (f"x-api-key: {SECRET}", "x-api-key: ***"),
        (f"headers {{'X-Api-Key': '{SECRET}'}}", "headers {'X-Api-Key': '***'}"),
        (f'{{"api_key": "{SECRET}", "model": "m"}}', '{"api_key": "***", "model": "m"}'),
        (f"Cookie: session={SECRET}", "Cookie: ***"),
        (f"sent Bearer {SECRET} to the server", "sent Bearer *** to the server"),
        (f"cannot connect to http://u:{SECRET}@h:1/v1: refused", "cannot connect to http://u:***@h:1/v1: refused"),
        (f"dsn host=h password={SECRET} user=u", "dsn host=h password=*** user=u"),
        (f"retry with api_key={SECRET}", "retry with api_key=***"),
    ],
)  # fmt: skip
def test_redact_text_masks_headers_and_pairs(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_redact_text_keeps_ordinary_words() -> None:
    text = "max_tokens=128 is over the limit; KeyError: 'x'; 5 tokens: ok; monkey business"
    assert redact_text(text) == text


def test_scrub_masks_known_secrets_anywhere_longest_first() -> None:
    assert scrub(f"key {SECRET}{SECRET[:5]} and {SECRET[:5]}", [SECRET, SECRET[:5]]) == (
        f"key {MASK}{MASK} and {MASK}"
    )
    assert scrub("a short pw stays", ["pw", ""]) == "a short pw stays"  # too short to mask


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.1", "127.0.0.2", "127.255.255.254", "0x7f.1", "2130706433", "::1",
     "[::1]", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "localhost", "LOCALHOST", "localhost."],
)  # fmt: skip
def test_loopback_in_every_form(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize(
    "host",
    ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "1.2.3", "gpu-box", "localhost.example.com",
     "127.0.0.1 x", "", "::ffff:10.0.0.1", "fe80::1"],
)  # fmt: skip
def test_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_the_demo_names_its_steps_without_the_store_password() -> None:
    from planner.demo import _say

    said: list[str] = []
    _say(["--db", f"postgresql://planner:{SECRET}@127.0.0.1:1/x", "db", "--help"], said.append)
    assert said == ["planner --db postgresql://planner:***@127.0.0.1:1/x db --help"]


def test_an_internal_error_is_shown_without_credentials(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    from planner.cli.context import user_errors

    monkeypatch.delenv("PLANNER_DEBUG", raising=False)

    @user_errors
    def command() -> None:
        raise RuntimeError(
            f"bad request to http://user:{SECRET}@h/v1 (Authorization: Bearer {SECRET})"
        )

    with pytest.raises(typer.Exit):
        command()
    shown = capsys.readouterr().err
    assert "internal error (RuntimeError: bad request to http://user:***@h/v1" in shown
    assert SECRET not in shown


def test_a_user_error_built_from_an_unmasked_url_is_masked_when_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The last guard: a PlannerError whose message quotes a URL the code forgot to mask."""
    import typer

    from planner.cli.context import user_errors
    from planner.errors import UsageError

    @user_errors
    def command() -> None:
        raise UsageError(f"--url http://user:{SECRET}@h/v1?api_key={SECRET}: cannot reach it")

    with pytest.raises(typer.Exit) as exited:
        command()
    shown = capsys.readouterr().err
    assert exited.value.exit_code == 2
    assert "error: --url http://user:***@h/v1?api_key=***" in shown
    assert SECRET not in shown
