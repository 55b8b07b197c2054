"""Keeping secrets out of what the project prints.

Two shapes of secret reach the command line's output: credentials written
into a URL (``http://user:secret@minio:9000``) and values of settings whose
name says they are secret (``spark.hadoop.fs.s3a.secret.key=...``). Both are
masked here, once, for every place that echoes a setting or a URL.
"""

from __future__ import annotations

import re

MASK = "****"

# Words that make a setting's name look secret, matched anywhere in the name,
# case-insensitively: spark.hadoop.fs.s3a.secret.key, spark.ssl.keyPassword,
# fs.s3a.session.token, fs.azure.account.key.<account>...
SECRET_WORDS = ("secret", "password", "token", "key")

# scheme://userinfo@ ... : the userinfo runs to the last '@' before the
# authority ends (a password may hold '@').
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")


def looks_secret(name: str) -> bool:
    """Whether a setting named ``name`` probably holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def has_userinfo(text: str) -> bool:
    """Whether ``text`` holds a URL with credentials in it."""
    return _URL_USERINFO.search(text) is not None


def mask_urls(text: str) -> str:
    """``text`` with the userinfo of every URL in it masked: ``http://****@host``."""
    return _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)


def mask_setting(name: str, value: str) -> str:
    """A setting's value as it may be printed."""
    if looks_secret(name):
        return MASK if value else value
    return mask_urls(value)


def mask_assignment(item: str) -> str:
    """``name=value`` as it may be printed (in an error about it, say)."""
    name, sep, value = item.partition("=")
    if not sep:
        return mask_urls(item)
    return f"{mask_urls(name)}={mask_setting(name, value)}"
