"""Credentials in what planner shows or keeps: the one place that masks them.

Every URL, database URL (DSN) or header that may hold a credential goes through
:func:`redact_url` (a URL) or :func:`redact_text` (free text, headers) before it is printed,
logged, raised in an exception's message, stored or written to a file; :func:`scrub` removes
known secrets (a password, an API key, from :func:`url_secrets`) from text that came from
elsewhere (a driver's or a server's error message) and may repeat them.

Only the standard library is used, so any command may import this at no cost; the masking is
done on the text as written (no URL library's parser, whose reading of a malformed URL could
differ from the masking's), and errs towards masking too much: a value that cannot be read is
masked whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import unquote, unquote_plus

from planner.common.text import printable

MASK = "***"

# Names of query parameters, libpq settings and ``name=value`` pairs whose values are secrets:
# a name that ends in one of these words (``password``, ``sslpassword``, ``api_key``,
# ``access_token``, ``X-Amz-Signature``, ``sig``; not ``max_tokens``).
_SECRET_END = (
    r"(?:pass|password|passwd|pwd|secret|token|credentials?|auth|key|apikey|sig|signature"
    r"|odbc_connect|dsn|session|sessionid|cookie)"
)
SECRET_NAME = re.compile(rf"[\w.%-]*{_SECRET_END}", re.IGNORECASE)
# ``name=value`` in a query string, a libpq ``k=v k=v`` string or free text; a value in single
# quotes may hold spaces, as libpq allows.
SECRET_PAIR = re.compile(
    rf"((?:^|(?<=[?&;,\s(\[{{\"']))[\w.%-]*{_SECRET_END}\s*=\s*)('[^']*'|[^\s&;\"']*)",
    re.IGNORECASE,
)
# A header that carries a credential, as a line or quoted in a message or JSON:
# ``Authorization: Bearer X``, ``x-api-key: X``, ``"api_key": "X"``, ``Cookie: X``.
_SECRET_HEADER = re.compile(
    r"((?:^|(?<=[\s\"'{,;(\[]))"
    r"(?:(?:proxy-)?authorization|(?:set-)?cookie|api[-_]?key|password|passwd|secret|token"
    r"|[\w-]*[-_](?:key|token|secret|password|signature|auth))"
    r"[\"']?\s*:\s*[\"']?)((?:(?:bearer|basic|digest|token|apikey)\s+)?)([^\s\"',;}]+)",
    re.IGNORECASE,
)
_BEARER = re.compile(r"\b(bearer|basic)(\s+)([A-Za-z0-9._~+/=-]{3,})", re.IGNORECASE)
# A URL inside free text: a scheme, ``://``, then anything up to white space or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_PORT = re.compile(r"\d*")
_PLAIN_USER = re.compile(r"[\w.%~+-]+")  # a user name as written, nothing to hide in it
WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
MIN_SECRET_CHARS = 3  # shorter "secrets" would mask ordinary letters in messages


def _mask_query(text: str) -> str:
    """``text`` (a query string or a fragment, without its ``?``/``#``) with the value of every
    parameter whose name names a secret masked; the rest as written."""
    parts = re.split(r"([&;])", text)
    for i in range(0, len(parts), 2):
        name, eq, _value = parts[i].partition("=")
        if eq and SECRET_NAME.fullmatch(unquote_plus(name).strip()):
            parts[i] = f"{name}={MASK}"
    return "".join(parts)


def _split_authority(rest: str) -> tuple[str, str]:
    """The authority (``user:password@host:port``) and what follows it (path, query, fragment)
    of a URL's text after ``://``."""
    cut = len(rest)
    for stop in "/?#":
        at = rest.find(stop)
        if 0 <= at < cut:
            cut = at
    return rest[:cut], rest[cut:]


def _password_cut(authority: str) -> bool:
    """Whether an authority without ``@`` ends in ``:`` and something that is not a port: a
    password, the rest of which (after a ``/``, ``?`` or ``#`` in it) seems to be the path."""
    _host, colon, port = authority.rpartition(":")
    return bool(colon) and not authority.endswith("]") and not _PORT.fullmatch(port)


def _mask_authority(authority: str, web: bool) -> str:
    at = authority.rfind("@")
    if at < 0:
        if _password_cut(authority):
            return f"{authority.rpartition(':')[0]}:{MASK}"  # a password with no host after it
        return authority
    userinfo, host = authority[:at], authority[at + 1 :]
    user, colon, password = userinfo.partition(":")
    if colon and password and "@" not in password and _PLAIN_USER.fullmatch(user):
        return f"{user}:{MASK}@{host}"  # the user names who connects; the password is masked
    if not colon and not web:
        return authority  # a database's user name alone (``postgresql://planner@host/db``)
    # A token as the user name of a web address (``https://TOKEN@host``), or an '@' in the
    # password: the whole user part is masked.
    return f"{MASK}@{host}"


def _mask_url(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    if not sep:
        # Not a URL: a libpq string (``host=x password=y``) or something unreadable. Whatever
        # stands before the last '@' may be ``user:password``.
        at = url.rfind("@")
        text = MASK + url[at:] if at >= 0 else url
        return SECRET_PAIR.sub(lambda m: m.group(1) + MASK, text)
    authority, tail = _split_authority(rest)
    if "@" not in authority and "@" in tail:
        if _password_cut(authority):
            # ``user:pa/ss@host``: the password holds a '/', '?' or '#' unencoded, so the
            # authority seems to end inside it; everything up to the last '@' is masked.
            authority, tail = _split_authority(rest[rest.rfind("@") + 1 :])
            authority = f"{MASK}@{authority}"
    else:
        authority = _mask_authority(authority, scheme.lower() in WEB_SCHEMES)
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        tail = path + "?" + _mask_query(query) + (hash_ + _mask_query(fragment) if hash_ else "")
    else:
        path, hash_, fragment = tail.partition("#")
        tail = path + (hash_ + _mask_query(fragment) if hash_ else "")
    return f"{scheme}://{authority}{tail}"


def redact_url(url: str, limit: int | None = None) -> str:
    """``url`` (an http(s) address, a database URL, a libpq ``k=v`` string) without its
    credentials, safe to print or keep: the password of ``user:password@`` (the whole user
    part where it is a token or holds an unencoded ``@``), and the value of every query
    parameter that names a secret (``password``, ``api_key``, ``token``, ``sig``, ...) become
    ``***``. Control characters are escaped; cut to ``limit`` characters where given."""
    return printable(_mask_url(url), limit=limit)


def redact_text(text: str) -> str:
    """Free text (a message, a header line, an exception's words) with credentials masked:
    URLs as :func:`redact_url` masks them, ``Authorization: Bearer X``, ``x-api-key: X`` and
    secret ``name=value`` pairs."""
    text = _URL_IN_TEXT.sub(lambda m: _mask_url(m.group(0)), text)
    text = _SECRET_HEADER.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + MASK, text)
    return SECRET_PAIR.sub(lambda m: m.group(1) + MASK, text)


def url_secrets(url: str) -> list[str]:
    """Every secret ``url`` holds, as written and decoded, longest first: to :func:`scrub` from
    a message that may repeat one without the URL around it."""
    found: set[str] = set()
    scheme, sep, rest = url.partition("://")
    if not sep:
        rest = url
    authority, tail = _split_authority(rest)
    at = rest.rfind("@")
    if at >= 0 and ("@" in authority or not sep or _password_cut(authority)):
        userinfo = rest[:at]
        user, colon, password = userinfo.partition(":")
        candidates = [password] if colon else []
        if not colon and (not sep or scheme.lower() in WEB_SCHEMES):
            candidates.append(user)  # a token as a web address's user name
        if colon and "@" in password:
            candidates += password.split("@")
        if not sep:
            candidates.append(userinfo.rpartition(":")[2])
        for candidate in candidates:
            found.update((candidate, unquote(candidate)))
    if sep and "@" not in authority and _password_cut(authority):
        found.add(authority.rpartition(":")[2])
    for match in re.finditer(r"[?#&;]([^=&;#]*)=([^&;#]*)", tail):
        if SECRET_NAME.fullmatch(unquote_plus(match.group(1)).strip()):
            found.update((match.group(2), unquote_plus(match.group(2))))
    for match in SECRET_PAIR.finditer(url):
        found.add(match.group(2).strip("'"))
    return sorted((s for s in found if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each of ``secrets`` (of 3 characters or more) masked,
    then whatever :func:`redact_text` recognises as a credential."""
    known = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}
    for secret in sorted(known, key=len, reverse=True):  # a longer one may hold a shorter one
        text = text.replace(secret, MASK)
    return redact_text(text)
