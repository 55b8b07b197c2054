"""Configuration: one TOML file, the environment, and flags.

Precedence, highest first: a command's flag, its environment variable, the
file, the built-in default. Every setting has an environment variable, and
the file only fills in the variables that are not set (before any command
runs), so each part of the project reads one place and child processes (Spark
workers, daemons) inherit the same values.

The file is ``--config PATH``, else ``$LINEAGE_CONFIG``, else
``$XDG_CONFIG_HOME/segment-lineage/config.toml`` when it exists. Unknown
sections or keys, and values of the wrong type, are refused by name. A file
holding a secret (the ZooKeeper password, or credentials inside a URL) must
not be readable by group or others. ``config show`` masks both.

:class:`Settings` holds what the edges need (ZooKeeper, the embedded server,
deep storage, Spark), built once where the program starts (the CLI's
:func:`load_settings`) and passed down; a script that passes none gets
:meth:`Settings.from_env`. This module is the one place that reads the
environment for them.
"""

from __future__ import annotations

import os
import stat
import tomllib
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from segment_lineage.lineage.core.errors import InvalidInputError
from segment_lineage.lineage.core.redact import MASK, has_userinfo, mask_urls

ENV_CONFIG = "LINEAGE_CONFIG"
ENV_JAVA_HOME = "JAVA_HOME"  # the machine's Java, for the embedded server: no file setting
ENV_AWS_REGION = "AWS_REGION"  # beside the S3 endpoint; AWS's own variable, no file setting


@dataclass(frozen=True)
class Setting:
    key: str  # section.name in the file
    env: str
    kind: type  # str, int, float or bool
    default: str | None
    secret: bool = False
    flag: str | None = None  # the flag that overrides it, when there is one


SETTINGS: tuple[Setting, ...] = (
    Setting("zookeeper.hosts", "LINEAGE_ZK", str, None, flag="--zk"),
    Setting("zookeeper.auth", "LINEAGE_ZK_AUTH", str, None, secret=True),
    Setting("zookeeper.session_timeout", "LINEAGE_ZK_SESSION_TIMEOUT", float, "10"),
    Setting("zookeeper.tls", "LINEAGE_ZK_TLS", bool, "0"),
    Setting("zookeeper.tls_ca", "LINEAGE_ZK_TLS_CA", str, None),
    Setting("zookeeper.tls_cert", "LINEAGE_ZK_TLS_CERT", str, None),
    Setting("zookeeper.tls_key", "LINEAGE_ZK_TLS_KEY", str, None),
    Setting("embedded.home", "LINEAGE_HOME", str, "~/.local/state/segment-lineage"),
    Setting("embedded.port", "LINEAGE_ZK_PORT", int, "2191"),
    Setting("embedded.heap", "LINEAGE_ZK_HEAP", str, "auto"),
    Setting("storage.s3_endpoint", "LINEAGE_S3_ENDPOINT", str, None),
    Setting("spark.master", "SPARK_MASTER", str, "local[2]", flag="--master"),
    Setting("retention.min_grace", "LINEAGE_RETENTION_MIN_GRACE", str, "10m"),
    Setting("retention.orphans", "LINEAGE_RETENTION_ORPHANS", bool, "1"),
    Setting("retention.orphan_grace", "LINEAGE_RETENTION_ORPHAN_GRACE", str, "1d"),
    Setting("retention.interval", "LINEAGE_RETENTION_INTERVAL", str, None),
    Setting("retention.cron", "LINEAGE_RETENTION_CRON", str, None),
    Setting("retention.metrics_port", "LINEAGE_RETENTION_METRICS_PORT", int, None),
    Setting("retention.metrics_host", "LINEAGE_RETENTION_METRICS_HOST", str, "127.0.0.1"),
)
BY_KEY = {s.key: s for s in SETTINGS}


def _default(key: str) -> str:
    """A setting's default, for the settings that have one."""
    value = BY_KEY[key].default
    assert value is not None, key
    return value


@dataclass(frozen=True)
class Effective:
    setting: Setting
    value: str | None
    source: str  # "flag", "env", "file" or "default"

    def shown(self) -> str | None:
        """The value as it may be printed: a secret setting masked, and
        credentials inside any URL (``LINEAGE_S3_ENDPOINT=http://u:p@host``) too."""
        if self.value is None:
            return None
        if not self.setting.secret:
            return mask_urls(self.value)
        user, sep, _ = self.value.partition(":")
        return f"{user}:{MASK}" if sep else MASK


@dataclass(frozen=True)
class Loaded:
    path: Path | None
    from_file: frozenset[str]  # env names the file set


@dataclass(frozen=True)
class Settings:
    """What the edges need, resolved once: a flag, else the environment (which
    the file filled in), else the default (:data:`SETTINGS` names each one's
    variable). Values stay as their variable spells them: the module that uses
    one parses it and refuses a bad value by its variable's name, when it is
    used, so a command never fails on a setting it does not need."""

    zk_hosts: str | None = None  # hosts[/chroot]; None: the embedded server
    zk_auth: str | None = field(default=None, repr=False)  # user:password: never printed
    zk_session_timeout: str = _default("zookeeper.session_timeout")  # seconds
    zk_tls: str = ""  # 1 (or true, yes) for TLS; "" or 0 for plain text
    zk_tls_ca: str | None = None  # PEM files
    zk_tls_cert: str | None = None
    zk_tls_key: str | None = None
    embedded_port: str = _default("embedded.port")
    embedded_heap: str = _default("embedded.heap")  # megabytes, 512m, 2g or auto
    java_home: str | None = None
    s3_endpoint: str | None = field(default=None, repr=False)  # may carry credentials: never printed
    aws_region: str | None = None
    spark_master: str = _default("spark.master")

    @property
    def spark_master_configured(self) -> bool:
        """Whether a Spark master was set (flag, environment or file), not the default."""
        return self.spark_master != _default("spark.master")

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        *,
        zk: str | None = None,
        auth: str | None = None,
        master: str | None = None,
    ) -> Settings:
        """From the flags given here, the environment (the process's unless
        ``env`` is given) and the defaults. An empty variable counts as unset,
        except for the ZooKeeper address, the session timeout and the port,
        where it is refused when used (as a bad value is): an empty address
        never means the embedded server."""
        env = os.environ if env is None else env
        default = cls()

        def var(key: str) -> str | None:
            return env.get(BY_KEY[key].env) or None

        return cls(
            zk_hosts=env.get(BY_KEY["zookeeper.hosts"].env),
            zk_auth=var("zookeeper.auth"),
            zk_session_timeout=env.get(BY_KEY["zookeeper.session_timeout"].env, default.zk_session_timeout),
            zk_tls=env.get(BY_KEY["zookeeper.tls"].env, default.zk_tls),
            zk_tls_ca=var("zookeeper.tls_ca"),
            zk_tls_cert=var("zookeeper.tls_cert"),
            zk_tls_key=var("zookeeper.tls_key"),
            embedded_port=env.get(BY_KEY["embedded.port"].env, default.embedded_port),
            embedded_heap=var("embedded.heap") or default.embedded_heap,
            java_home=env.get(ENV_JAVA_HOME) or None,
            s3_endpoint=var("storage.s3_endpoint"),
            aws_region=env.get(ENV_AWS_REGION),
            spark_master=var("spark.master") or default.spark_master,
        ).with_flags(zk=zk, auth=auth, master=master)

    def with_flags(
        self, *, zk: str | None = None, auth: str | None = None, master: str | None = None
    ) -> Settings:
        """These settings with the flags given (an empty one counts as not
        given, but an empty address stays empty, to be refused when used)."""
        return replace(
            self,
            zk_hosts=zk or (zk if self.zk_hosts is None else self.zk_hosts),
            zk_auth=auth or self.zk_auth,
            spark_master=master or self.spark_master,
        )


def default_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "segment-lineage" / "config.toml"


def config_path(explicit: str | None, env: Mapping[str, str]) -> tuple[Path | None, bool]:
    """The file to read, and whether it was asked for (then it must exist)."""
    if explicit:
        return Path(explicit), True
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]), True
    path = default_path()
    return (path, False) if path.exists() else (None, False)


# What a file value of each kind of setting must be (a bool is no number), as the refusal says it.
_KIND_CHECKS: dict[type, tuple[Callable[[object], bool], str]] = {
    bool: (lambda v: isinstance(v, bool), "true or false"),
    int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
    str: (lambda v: isinstance(v, str), "a string"),
}


def _text(setting: Setting, value: object) -> str:
    """A file value as its environment variable would spell it; wrong types refused."""
    fits, wanted = _KIND_CHECKS[setting.kind]
    if not fits(value):
        raise InvalidInputError(f"config {setting.key} must be {wanted}")
    if isinstance(value, bool):  # a bool setting's
        return "1" if value else "0"
    if isinstance(value, str) and "\x00" in value:  # no environment variable can hold one
        raise InvalidInputError(f"config {setting.key} holds a NUL character")
    return str(value)


def parse(raw: str, where: str) -> dict[str, str]:
    """The file's settings as environment variable -> value."""
    try:
        doc = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"config file {where} is not valid TOML: {exc}") from None
    out: dict[str, str] = {}
    for section, body in doc.items():
        if not isinstance(body, dict):
            raise InvalidInputError(f"config file {where}: {section!r} must be a [section]")
        for name, value in body.items():
            setting = _setting(where, f"{section}.{name}")
            out[setting.env] = _text(setting, value)
    return out


def _setting(where: str, key: str) -> Setting:
    """The setting a file's ``section.name`` names; an unknown one refused, the known ones listed."""
    setting = BY_KEY.get(key)
    if setting is None:
        known = ", ".join(s.key for s in SETTINGS)
        raise InvalidInputError(f"config file {where}: unknown setting {key} (known: {known})")
    return setting


def _check_private(path: Path, settings: Mapping[str, str]) -> None:
    secrets = [s.key for s in SETTINGS if s.env in settings and (s.secret or has_userinfo(settings[s.env]))]
    if secrets and stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise InvalidInputError(
            f"config file {path} holds {secrets[0]} and is readable by group or others",
            remedy=f"chmod 600 {path}",
        )


def _read(path: Path, required: bool) -> str | None:
    """The file's text; None when it does not exist and was not asked for."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a FIFO or a device would block or never end
            raise InvalidInputError(f"config file {path} is not a regular file")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if required:
            raise InvalidInputError(f"config file {path} does not exist") from None
        return None
    except UnicodeDecodeError:
        raise InvalidInputError(f"config file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read config file {path}: {exc.strerror}") from None


def load(explicit: str | None, env: MutableMapping[str, str]) -> Loaded:
    """Read the file (if any) and fill in the variables ``env`` does not set."""
    path, required = config_path(explicit, env)
    if path is None:
        return Loaded(None, frozenset())
    raw = _read(path, required)
    if raw is None:
        return Loaded(None, frozenset())
    settings = parse(raw, str(path))
    _check_private(path, settings)
    filled = {name: value for name, value in settings.items() if not env.get(name)}
    env.update(filled)
    return Loaded(path, frozenset(filled))


def load_settings(explicit: str | None, *, zk: str | None = None) -> tuple[Loaded, Settings]:
    """The command line's one read of its configuration, before any command
    runs: the file (``--config``, see :func:`config_path`) fills in the
    variables not set, which child processes inherit, then :class:`Settings`
    are built from the flags, that environment and the defaults."""
    loaded = load(explicit, os.environ)
    return loaded, Settings.from_env(os.environ, zk=zk)


# Settings whose variable set but empty is not "unset" (Settings.from_env):
# refused when used, so shown as set, not as the default.
EMPTY_IS_SET = frozenset({"zookeeper.hosts", "zookeeper.session_timeout", "embedded.port"})


def effective(
    loaded: Loaded, flags: Mapping[str, str | None], env: Mapping[str, str] | None = None
) -> list[Effective]:
    """Every setting's value and where it came from (in the process's environment unless ``env`` is given)."""
    env = os.environ if env is None else env
    out = []
    for setting in SETTINGS:
        flagged = flags.get(setting.flag) if setting.flag else None
        if flagged:
            out.append(Effective(setting, flagged, "flag"))
        elif env.get(setting.env) or (setting.key in EMPTY_IS_SET and setting.env in env):
            source = "file" if setting.env in loaded.from_file else "env"
            out.append(Effective(setting, env[setting.env], source))
        else:
            out.append(Effective(setting, setting.default, "default"))
    return out


# ---- the state directory: the embedded ZooKeeper's data, the demo's files ----

ENV_HOME = BY_KEY["embedded.home"].env


def state_dir() -> Path:
    """The project's state directory: ``$LINEAGE_HOME``, else
    ``$XDG_STATE_HOME/segment-lineage`` (``~/.local/state/segment-lineage``).
    Read at each call, so a changed environment takes effect."""
    explicit = os.environ.get(ENV_HOME)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "segment-lineage"
