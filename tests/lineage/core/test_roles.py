"""The role matrix (docs/security.md), cell by cell, through the command
line on real ZooKeeper with an ACL policy in force: each role does its work,
and every command meant for another role is refused with nothing changed
(the table's head, its Delta log, its files). What only an admin may do is
refused by ZooKeeper itself: the commit writes a node only admins may write."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from segment_lineage.lineage.core.acl import ADMIN_ROLE
from segment_lineage.lineage.core.visibility import visible_segments
from tests.helpers.run import IDENTITIES, ident
from tests.lineage.zk.test_security import cli, store_as

pytestmark = [pytest.mark.zk, pytest.mark.slow]

T = "events"
ROLES = ("reader", "retention", "pusher", "admin")


def _input(path: Path, day: int) -> str:
    ts = pa.array([1_704_067_200_000 + day * 86_400_000 + i for i in range(3)], pa.timestamp("ms", tz="UTC"))
    pq.write_table(pa.table({"ts": ts, "v": pa.array([day] * 3, pa.int64())}), path)
    return str(path)


def _snapshot(zk: str, root: Path) -> tuple[int, int, tuple[str, ...]]:
    """What a refused command must leave as it was: the head's version, the
    Delta log's commits and every file under the root."""
    admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
    try:
        version = admin.read(T).state.version
    finally:
        admin.close()
    log = root / "_delta_log"
    commits = len(list(log.glob("*.json"))) if log.exists() else -1
    return version, commits, tuple(sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()))


@pytest.fixture
def table(zk_hosts: str, tmp_path: Path) -> tuple[str, Path]:
    zk = zk_hosts
    args = []
    for role in ("pusher", "retention", "reader"):
        user, _, password = IDENTITIES[role].partition(":")
        code, out, err = cli(zk, None, "acl", "digest", user, stdin=password + "\n")
        assert code == 0, err
        args += [f"--{role}", out.strip()]
    code, _, err = cli(zk, IDENTITIES[ADMIN_ROLE], "acl", "apply", *args)
    assert code == 0, err
    root = tmp_path / T
    code, _, err = cli(
        zk, IDENTITIES[ADMIN_ROLE], "table", "create", T, "--root", str(root), "--type", "APPEND",
        "--time-column", "ts", "--mirror", "delta", "--replaced-retention", "1d",
    )  # fmt: skip
    assert code == 0, err
    for day in range(2):
        code, _, err = cli(
            zk, IDENTITIES["pusher"], "push", T, "--input", _input(tmp_path / f"d{day}.parquet", day),
            "--mode", "append",
        )  # fmt: skip
        assert code == 0, err
    return zk, root


def _visible_segment(zk: str) -> str:
    admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
    try:
        return sorted(s.name for s in visible_segments(admin.read(T).state))[0]
    finally:
        admin.close()


def _entry(zk: str) -> str:
    admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
    try:
        state = admin.read(T).state
        done = [e for e in state.entries.values() if e.state.value == "COMPLETED"]
        return max(done, key=lambda e: e.timestamp_ms).entry_id
    finally:
        admin.close()


# (what, the command's words, the roles that may, changes the table when allowed)
READS: list[tuple[str, list[str]]] = [
    ("table list", ["table", "list"]),
    ("table show", ["table", "show", T]),
    ("segments", ["segments", T]),
    ("segment list", ["segment", "list", T]),
    ("entries", ["entries", T]),
    ("history", ["history", T]),
    ("read", ["read", T]),
    ("mirror status", ["mirror", "status", T]),
    ("mirror versions", ["mirror", "versions", T]),
    ("acl show", ["acl", "show"]),
]


@pytest.mark.parametrize(("what", "words"), READS, ids=[r[0] for r in READS])
def test_every_role_reads(table: tuple[str, Path], what: str, words: list[str]) -> None:
    zk, root = table
    before = _snapshot(zk, root)
    for role in ROLES:
        code, _, err = cli(zk, IDENTITIES[role], *words)
        assert code == 0, (what, role, err)
    assert _snapshot(zk, root)[0] == before[0]


def test_each_write_is_its_roles_and_refused_to_the_others(table: tuple[str, Path], tmp_path: Path) -> None:
    """Every write command in the matrix, refused roles first (nothing may
    change), then the roles that may (each must succeed)."""
    zk, root = table
    rollback_to = _snapshot(zk, root)[0]
    cells: list[tuple[str, list[str], tuple[str, ...]]] = [
        (
            "push",
            ["push", T, "--input", _input(tmp_path / "d7.parquet", 7), "--mode", "append"],
            ("pusher", "admin"),
        ),
        ("revert", ["revert", T, "ENTRY", "--force"], ("pusher", "admin*")),
        ("rollback", ["rollback", T, "--to-version", str(rollback_to - 1)], ("pusher", "admin")),
        ("rollback forward", ["rollback", T, "--to-version", str(rollback_to)], ("pusher", "admin*")),
        ("mirror sync", ["mirror", "sync", T], ("pusher", "retention", "admin")),
        ("mirror repair", ["mirror", "repair", T], ("pusher", "retention", "admin")),
        ("retention run", ["retention", "run", "--table", T, "--yes"], ("retention", "admin")),
        ("table alter replaced", ["table", "alter", T, "--replaced-retention", "0s"], ("admin",)),
        ("table alter mirror", ["table", "alter", T, "--mirror-retention", "1s"], ("admin",)),
        ("segment delete", ["segment", "delete", T, "SEGMENT"], ("admin",)),
        ("mirror disable", ["mirror", "disable", T], ("admin",)),
        ("mirror enable", ["mirror", "enable", T], ("admin",)),
        ("acl apply", ["acl", "apply"], ("admin",)),
        ("table claim", ["table", "claim", T], ("admin",)),
        ("table drop purge", ["table", "drop", T, "--purge"], ("admin*",)),  # run by admin: test_production
        ("table drop", ["table", "drop", T, "--force"], ("admin",)),
    ]
    for what, template, may in cells:
        fill = {"SEGMENT": _visible_segment, "ENTRY": _entry}
        words = [fill[w](zk) if w in fill else w for w in template]
        for role in ROLES:
            if role in may or f"{role}*" in may:  # role*: may, but the cell does not run it again
                continue
            before = _snapshot(zk, root)
            code, out, err = cli(zk, IDENTITIES[role], *words)
            assert code != 0, (what, role, out)
            assert any(k in err for k in ("role", "not authorised", "admin", "refused this identity")), (
                what,
                role,
                err,
            )
            assert "needs the  role" not in err, err
            assert _snapshot(zk, root) == before, (what, role, err)
        for role in (r for r in may if not r.endswith("*")):
            code, out, err = cli(zk, IDENTITIES[role], *words)
            assert code == 0, (what, role, err)


def test_zookeeper_itself_refuses_an_admins_change_to_a_pusher(
    table: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the client's own role check taken out, the commit of a settings
    change, or of a delete that hides visible data, still fails for a pusher:
    it writes the admins' node in the same multi, which only admins may."""
    from segment_lineage.lineage.core.errors import AuthError
    from segment_lineage.lineage.core.settings import SettingsChange
    from segment_lineage.lineage.manager import LineageManager
    from segment_lineage.lineage.manager.commit import ManagerBase

    zk, root = table
    monkeypatch.setattr(ManagerBase, "require_role", lambda *_a, **_k: None)
    pusher = store_as(zk, IDENTITIES["pusher"])
    try:
        m = LineageManager(pusher)
        before = _snapshot(zk, root)
        with pytest.raises(AuthError, match="needs the admin role"):
            m.alter_table(T, SettingsChange(replaced_segments_retention="0s"))
        with pytest.raises(AuthError, match="needs the admin role"):
            m.delete_segments(T, [_visible_segment(zk)])
        assert _snapshot(zk, root) == before
    finally:
        pusher.close()


def test_a_settings_change_under_another_name_is_still_an_admins(table: tuple[str, Path]) -> None:
    """A commit that moves a setting is refused to a pusher whatever operation
    it names (here a retention window shortened inside a 'rollback')."""
    import dataclasses

    from segment_lineage.lineage.core import transitions
    from segment_lineage.lineage.core.errors import AuthError
    from segment_lineage.lineage.core.model import Operation
    from segment_lineage.lineage.core.settings import SettingsChange
    from segment_lineage.lineage.manager import LineageManager

    zk, root = table
    pusher = store_as(zk, IDENTITIES["pusher"])
    try:
        m = LineageManager(pusher)
        before = _snapshot(zk, root)

        def sneaky(state, _now):  # type: ignore[no-untyped-def]
            change = transitions.alter_table(state, SettingsChange(time_retention="1d", versions_kept=3))
            return dataclasses.replace(change, operation=Operation.ROLLBACK)

        with pytest.raises(AuthError, match="needs the admin role"):
            m.commit(T, sneaky, "sneaky")
        assert _snapshot(zk, root) == before
    finally:
        pusher.close()


def test_history_names_the_zookeeper_identity_not_the_login(
    table: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit made through the command line under an identity is recorded
    as that identity's user at the host, whatever the login name says."""
    import json

    zk, _root = table
    monkeypatch.setenv("LOGNAME", "boss")
    monkeypatch.setenv("USER", "boss")
    code, out, err = cli(zk, IDENTITIES["pusher"], "--json", "history", T)
    assert code == 0, err
    pushes = [r for r in json.loads(out) if r["operation"] == "END_REPLACE"]
    user = IDENTITIES["pusher"].partition(":")[0]
    assert pushes and all(r["actor"].startswith(f"{user}@") for r in pushes), pushes


@pytest.mark.parametrize("label", ["REVERT_REPLACE", "REGISTER", "RETENTION_MARK"])
def test_unregistering_visible_data_is_refused_to_a_pusher_under_any_name(
    table: tuple[str, Path], label: str
) -> None:
    """A hand-made change that unregisters the visible segments is an
    admin's (or, named a retention mark, the retention role's): refused to a
    pusher by ZooKeeper, nothing changed."""
    import dataclasses

    from segment_lineage.lineage.core.errors import AuthError
    from segment_lineage.lineage.core.model import Change, Operation
    from segment_lineage.lineage.manager import LineageManager

    zk, root = table
    pusher = store_as(zk, IDENTITIES["pusher"])
    try:
        m = LineageManager(pusher)
        before = _snapshot(zk, root)

        def emptied(state, _now):  # type: ignore[no-untyped-def]
            return Change(state=dataclasses.replace(state, segments={}), operation=Operation(label))

        role = "retention" if label == "RETENTION_MARK" else "admin"
        with pytest.raises(AuthError, match=f"needs the {role} role"):
            m.commit(T, emptied, "sneaky")
        assert _snapshot(zk, root) == before
    finally:
        pusher.close()


def test_time_retention_under_a_policy_is_the_retention_roles(table: tuple[str, Path]) -> None:
    """A pass that condemns expired visible segments writes the retention
    role's node: the retention identity runs it; its mark landed."""
    zk, _root = table
    code, _, err = cli(zk, IDENTITIES[ADMIN_ROLE], "table", "alter", T, "--time-retention", "1d")
    assert code == 0, err
    code, out, err = cli(
        zk, IDENTITIES["retention"], "retention", "run", "--table", T, "--yes", "--allow-large-cut"
    )
    assert code == 0, (out, err)
    admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
    try:
        assert not visible_segments(admin.read(T).state)
    finally:
        admin.close()


def test_a_push_by_another_role_is_refused_by_its_role(table: tuple[str, Path], tmp_path: Path) -> None:
    """A reader's or retention's push, push set or publish is refused naming
    the identity, the role it has and the role it needs; not by the ACL of
    an own owners folder it has none of. Nothing changes."""
    zk, root = table
    data = _input(tmp_path / "d9.parquet", 9)
    spec = tmp_path / "set.toml"
    spec.write_text(f'[[push]]\ntable = "{T}"\ninput = "{data}"\nmode = "append"\n')
    code, out, err = cli(zk, IDENTITIES["pusher"], "--json", "push", T, "--input", data, "--stage")
    assert code == 0, err
    staged = json.loads(out)["entry"]
    for role in ("reader", "retention"):
        user = IDENTITIES[role].partition(":")[0]
        for doing, words in (
            ("a push", ["push", T, "--input", data, "--mode", "append"]),
            ("a push set", ["push-set", str(spec)]),
            ("publishing a staged push", ["publish", T, staged]),
        ):
            before = _snapshot(zk, root)
            code, _, err = cli(zk, IDENTITIES[role], *words)
            assert code == 1, (role, doing, err)
            # a set's error says it failed, then why (its table's claim was refused by role)
            assert f"{doing} needs the pusher role; identity '{user}' is {role}" in err, (role, err)
            assert "error: " in err and "Traceback" not in err, err
            assert "hint: run it as an identity with that role (LINEAGE_ZK_AUTH)" in err, err
            assert "owners" not in err, err
            assert _snapshot(zk, root) == before, (role, doing)


def test_a_missing_versions_folder_is_an_admins_to_make(table: tuple[str, Path], tmp_path: Path) -> None:
    """A table made before versions were recorded has no versions folder; a
    commit makes it on demand, which only an admin may under a policy: a
    pusher is told that, and that 'acl apply' makes it, with nothing
    changed; after 'acl apply' the pusher's push goes through."""
    zk, root = table
    admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
    try:
        admin.client.delete(f"{admin.paths.head(T)}/versions", recursive=True)
    finally:
        admin.close()
    push = ["push", T, "--input", _input(tmp_path / "d8.parquet", 8), "--mode", "append"]
    before = _snapshot(zk, root)
    code, _, err = cli(zk, IDENTITIES["pusher"], *push)
    assert code == 1, err
    assert f"error: table '{T}' has no versions folder" in err and "only an admin may make it" in err, err
    assert "identity 'loader' is pusher; nothing was committed" in err, err
    assert "hint: an admin runs 'lineage acl apply' again" in err and "not authorised" not in err, err
    assert _snapshot(zk, root) == before
    args = ["--pusher", ident("pusher"), "--retention", ident("retention"), "--reader", ident("reader")]
    code, out, err = cli(zk, IDENTITIES[ADMIN_ROLE], "acl", "apply", *args)
    assert code == 0 and "1 folder(s) created" in out, (out, err)
    code, _, err = cli(zk, IDENTITIES["pusher"], *push)
    assert code == 0, err


@pytest.mark.parametrize("chroot", ["closed", "readable"])
def test_an_identity_the_policy_does_not_name_is_told_it_has_no_role(
    table: tuple[str, Path], chroot: str
) -> None:
    """Whether ZooKeeper refuses it the chroot (closed, as 'acl apply' leaves
    it) or the policy (a chroot anyone may read): an unknown user, a known
    user with a wrong password (ZooKeeper cannot tell them apart), no
    identity at all, and a scheme given by mistake each hear 'identity 'x'
    has no role', why, and where to look."""
    from kazoo.security import ACL, ANYONE_ID_UNSAFE

    from segment_lineage.lineage.core.acl import READ, Place
    from segment_lineage.lineage.zk.store.nodes import policy_acl

    zk, root = table
    if chroot == "readable":
        admin = store_as(zk, IDENTITIES[ADMIN_ROLE])
        try:
            policy = admin.nodes.policy()
            assert policy is not None
            admin.client.set_acls("/", [*policy_acl(policy, Place.FOLDER), ACL(READ, ANYONE_ID_UNSAFE)])
        finally:
            admin.close()
    before = _snapshot(zk, root)
    for auth, user, why in (
        ("nobody:pw", "nobody", "the ACL policy does not name it, or its password is wrong"),
        ("loader:wrong-pw", "loader", "the ACL policy does not name it, or its password is wrong"),
        (None, "anonymous", "LINEAGE_ZK_AUTH is not set"),
        ("digest:nobody:pw", "digest", "with no scheme: 'digest' was taken as the user"),
    ):
        for words in (["table", "list"], ["history", T], ["read", T]):
            code, _, err = cli(zk, auth, *words)
            assert code == 1, (auth, words, err)
            assert f"identity '{user}' has no role (" in err and why in err, (auth, words, err)
            assert "hint: set LINEAGE_ZK_AUTH=user:password to an identity the policy names" in err, err
            assert ("refused reading the ACL policy" in err) == (chroot == "readable"), err
    assert _snapshot(zk, root) == before
