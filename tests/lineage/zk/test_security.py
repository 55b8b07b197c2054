"""Least-privilege ACLs end to end on real ZooKeeper: an admin, a pusher, the
retention daemon and a reader, each doing its work and refused the rest."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, ANYONE_ID_UNSAFE, make_digest_acl_credential
from typer.testing import CliRunner

from segment_lineage.cli import app
from segment_lineage.ingest.arrow_push import push_arrow
from segment_lineage.ingest.readers import SnapshotReader
from segment_lineage.lineage import codec
from segment_lineage.lineage.core.acl import (
    ADMIN_ROLE,
    ALL,
    CREATE,
    DELETE,
    READ,
    RIGHTS,
    ROLES,
    WRITE,
    AclPolicy,
    Place,
    digest_id,
    place_of,
    rights_text,
)
from segment_lineage.lineage.core.errors import AuthError, CorruptRecordError, InvalidInputError, LineageError
from segment_lineage.lineage.core.model import Segment, TableConfig
from segment_lineage.lineage.manager import LineageManager
from segment_lineage.lineage.storage.claim_marker import RootClaimFiles
from segment_lineage.lineage.store.election import Leadership, Ownership, owner_role
from segment_lineage.lineage.zk.client import ZkSettings
from segment_lineage.lineage.zk.connect import store_for
from segment_lineage.lineage.zk.server import free_port
from segment_lineage.lineage.zk.store import ROOT, ZkStore
from tests.helpers.paths import REPO
from tests.helpers.run import IDENTITIES, ident
from tests.helpers.zk import dump, walk

runner = CliRunner()
T = "events"


def cli(zk: str, auth: str | None, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    env = {"LINEAGE_ZK_AUTH": auth or ""}
    result = runner.invoke(app, ["--zk", zk, *args], env=env, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def store_as(zk: str, auth: str | None) -> ZkStore:
    return store_for(ZkSettings(hosts=zk, auth=auth))


@pytest.fixture
def secured(zk_hosts: str, tmp_path: Path) -> Iterator[str]:
    """A table made before the policy (open ACLs), then the policy applied by the admin."""
    open_store = store_as(zk_hosts, None)
    try:
        LineageManager(open_store, claims=RootClaimFiles()).create_table(
            TableConfig.build(T, str(tmp_path / T), replaced_segments_retention="0s")
        )
        open_store.client.delete(f"{ROOT}/tables/{T}/owners")  # as tables made before the folder existed
    finally:
        open_store.close()
    digests = {}
    for role, auth in IDENTITIES.items():
        user, _, password = auth.partition(":")
        code, out, err = cli(zk_hosts, None, "acl", "digest", user, stdin=password + "\n")
        assert code == 0, err
        digests[role] = out.strip()
    args = ["--pusher", digests["pusher"], "--retention", digests["retention"], "--reader", digests["reader"]]
    code, out, err = cli(zk_hosts, IDENTITIES[ADMIN_ROLE], "acl", "apply", *args)
    assert code == 0, err
    # the table's owners, its pusher's owners and leases, its reader's and
    # retention's leases, leaders, leaders/retention, and the admins' and retention's nodes
    assert "9 folder(s) created" in out
    return zk_hosts


def rows(label: str, n: int) -> pa.Table:
    return pa.table({"label": [label] * n, "i": list(range(n))})


def content(m: LineageManager) -> list[str]:
    with SnapshotReader(m, T) as reader:
        return sorted(reader.to_arrow().column("label").to_pylist())


def assert_acls_follow_the_policy(store: ZkStore, policy: AclPolicy) -> int:
    checked = 0
    for path in walk(store.client, ROOT):
        place = place_of(path[len(ROOT) :])
        assert place is not None, path
        acls, _ = store.client.get_acls(path)
        got = {(a.id.scheme, a.id.id, a.perms) for a in acls}
        owner = policy.owner_of(place, path.rsplit("/", 1)[-1])
        want = {("digest", i, r) for i, r in policy.grants(place, owner)}
        assert got == want, (path, got, want)
        checked += 1
    return checked


def test_each_role_does_its_work_and_nothing_else(secured: str, tmp_path: Path) -> None:
    zk = secured
    pusher, reader, janitor, admin = (
        store_as(zk, IDENTITIES[r]) for r in ("pusher", "reader", "retention", "admin")
    )
    try:
        # The pusher pushes twice; the second push replaces the first.
        pm = LineageManager(pusher)
        push_arrow(pm, T, [rows("old", 3)])
        push_arrow(pm, T, [rows("new", 4)])
        assert pusher.nodes.role() == "pusher" and not pusher.nodes.may_sweep()
        old_files = [p for p in (tmp_path / T).rglob("*.parquet")]
        assert len(old_files) == 2

        # The reader reads one pinned snapshot, in the API and on the command line.
        assert content(LineageManager(reader)) == ["new"] * 4
        code, out, err = cli(zk, IDENTITIES["reader"], "read", T)
        assert code == 0, err
        assert "new" in out and "old" not in out

        # Retention deletes the replaced file, on the command line, and sweeps metadata.
        code, out, err = cli(zk, IDENTITIES["retention"], "retention", "run", "--table", T, "--force")
        assert code == 0, err + out
        assert len(list((tmp_path / T).rglob("*.parquet"))) == 1
        assert janitor.collect_garbage(T, grace_ms=0) >= 0
        assert Leadership(janitor, "retention", "janitor-1").check() is not None
        assert Ownership(janitor, "janitor-1").check([T]) != {}  # a table's own election, made on first use

        before = dump(admin.client)
        refusals = [
            (
                "pusher creates a table",
                lambda: LineageManager(pusher).create_table(TableConfig.build("t2", "/x/t2")),
            ),
            ("pusher drops the table", lambda: LineageManager(pusher).drop_table(T, force=True)),
            ("pusher sweeps metadata", lambda: pusher.collect_garbage(T, grace_ms=0)),
            ("pusher joins retention", lambda: Leadership(pusher, "retention", "p").check()),
            ("pusher joins a table's retention", lambda: Leadership(pusher, owner_role("t9"), "p").check()),
            ("reader registers a segment", lambda: LineageManager(reader).register_segments(T, [seg("x")])),
            ("reader pushes", lambda: push_arrow(LineageManager(reader), T, [rows("evil", 1)])),
            ("reader sweeps metadata", lambda: reader.collect_garbage(T, grace_ms=0)),
            ("retention pushes", lambda: push_arrow(LineageManager(janitor), T, [rows("evil", 1)])),
            (
                "retention creates a table",
                lambda: LineageManager(janitor).create_table(TableConfig.build("t3", "/x/t3")),
            ),
        ]
        for what, attempt in refusals:
            with pytest.raises(LineageError, match=r"not authorised|needs the pusher role") as refused:
                attempt()
            assert isinstance(refused.value, AuthError) or "not authorised" in str(refused.value), what
        assert dump(admin.client) == before

        # Nobody else gets in, and no role may change the policy.
        for auth in ("intruder:guess", None, "loader:wrong-password"):
            code, _, err = cli(zk, auth, "table", "show", T)
            assert code == 1 and ("has no role" in err or "refused this identity" in err), (auth, err)
        for role in ("pusher", "reader"):  # deep storage is not ZooKeeper's: the role is checked first
            code, _, err = cli(zk, IDENTITIES[role], "retention", "run", "--force")
            assert code == 1 and "a retention pass needs the retention role; identity" in err, err
        code, _, err = cli(zk, IDENTITIES["pusher"], "acl", "apply", "--reader", ident("reader"))
        assert code == 1 and "not authorised" in err
        assert dump(admin.client) == before

        policy = admin.nodes.policy()
        assert policy is not None
        assert assert_acls_follow_the_policy(admin, policy) > 20
        code, out, _ = cli(zk, IDENTITIES["reader"], "acl", "show")
        assert code == 0 and "this identity: analyst (reader)" in out
    finally:
        for store in (pusher, reader, janitor, admin):
            store.close()
    assert content(LineageManager(store_as(zk, IDENTITIES["admin"]))) == ["new"] * 4


def test_a_pusher_publishes_to_the_mirror_after_its_push_once_the_folder_is_there(
    secured: str, tmp_path: Path
) -> None:
    """The mirror lock's folder: made with the table, or by ``acl apply`` for
    a table made before it; a pusher's publish after its push holds it."""
    zk = secured
    data = tmp_path / "in.parquet"
    pa.parquet.write_table(rows("a", 2), data)
    code, _, err = cli(zk, IDENTITIES["pusher"], "push", T, "--input", str(data))
    assert code == 0, err
    code, out, err = cli(zk, IDENTITIES["admin"], "mirror", "enable", T)
    assert code == 0 and "as Delta 0" in out, err
    admin = store_as(zk, IDENTITIES["admin"])
    try:
        admin.client.delete(f"{ROOT}/tables/{T}/mirror")  # as tables made before the folder existed
    finally:
        admin.close()
    code, _, err = cli(zk, IDENTITIES["pusher"], "push", T, "--input", str(data))
    assert code == 0 and "was not updated" in err and "lineage acl apply" in err, err  # the push stands
    args = ["--pusher", ident("pusher"), "--retention", ident("retention"), "--reader", ident("reader")]
    code, out, err = cli(zk, IDENTITIES["admin"], "acl", "apply", *args)
    assert code == 0 and "1 folder(s) created" in out, err
    code, _, err = cli(zk, IDENTITIES["pusher"], "push", T, "--input", str(data))
    assert code == 0 and "warning" not in err, err
    code, out, err = cli(zk, IDENTITIES["reader"], "--json", "mirror", "status", T)
    assert code == 0 and json.loads(out)["behind_versions"] == 0, err
    code, out, err = cli(zk, IDENTITIES["retention"], "mirror", "sync", T)
    assert code == 0 and "up to date" in out, err
    code, _, err = cli(zk, IDENTITIES["reader"], "mirror", "sync", T)
    assert code == 1 and "needs the pusher or retention role" in err, err  # a sync writes the log
    log = tmp_path / T / "_delta_log"
    code, _, err = cli(zk, IDENTITIES["pusher"], "table", "drop", T, "--force")
    assert code == 1 and "not authorised" in err and log.is_dir(), err  # refused: the log stays
    code, _, err = cli(
        zk, IDENTITIES["reader"], "table", "drop", T, "--force"
    )  # told of the drop, not the mirror
    assert code == 1 and "dropping table" in err and "only an admin drops tables" in err, err
    assert "publishing to" not in err and log.is_dir(), err
    code, out, err = cli(zk, IDENTITIES["admin"], "table", "drop", T, "--force")
    assert code == 0 and "removed the Delta log" in out and not log.exists(), err


def seg(name: str) -> Segment:
    return Segment(name, f"{name}.parquet", rows=1)


def test_roles_connect_through_a_chroot_the_admin_created(zk_hosts: str) -> None:
    args = ["--pusher", ident("pusher"), "--retention", ident("retention"), "--reader", ident("reader")]
    code, _, err = cli(zk_hosts, IDENTITIES[ADMIN_ROLE], "acl", "apply", *args)  # creates the chroot
    assert code == 0, err
    for role in ROLES:
        code, out, err = cli(zk_hosts, IDENTITIES[role], "acl", "show")
        assert code == 0 and f"({role})" in out, err
    code, _, err = cli(zk_hosts, "intruder:guess", "table", "list")
    assert code == 1 and "refused this identity: identity 'intruder' has no role" in err, err  # at the chroot


def test_another_identitys_store_without_a_policy_is_told_as_such(zk_hosts: str, tmp_path: Path) -> None:
    """Without a policy a store is its creator's alone: another identity is
    refused the chroot, and told that, not that it has no role."""
    code, _, err = cli(zk_hosts, "alice:pw", "table", "create", T, "--root", str(tmp_path / T))
    assert code == 0, err
    code, _, err = cli(zk_hosts, "bob:pw", "table", "list")
    assert code == 1 and "the store there has no ACL policy and is another identity's" in err, err
    assert "hint: set LINEAGE_ZK_AUTH to the identity that made it" in err and "has no role" not in err, err


def test_apply_refuses_bad_input_and_changes_nothing(zk_hosts: str) -> None:
    store_as(zk_hosts, None).close()
    cases = [
        (None, ["--pusher", ident("pusher")], "needs LINEAGE_ZK_AUTH"),
        (IDENTITIES[ADMIN_ROLE], ["--pusher", "loader:not-a-digest"], "invalid digest id"),
        (IDENTITIES[ADMIN_ROLE], ["--pusher", ident("pusher"), "--reader", ident("pusher")], "two roles"),
        (IDENTITIES[ADMIN_ROLE], ["--reader", ident(ADMIN_ROLE)], "two roles"),
    ]
    for auth, args, message in cases:
        code, _, err = cli(zk_hosts, auth, "acl", "apply", *args)
        assert code == 2 and message in err, (args, err)
    admin = store_as(zk_hosts, IDENTITIES[ADMIN_ROLE])
    try:
        assert admin.nodes.policy() is None
    finally:
        admin.close()
    code, _, err = cli(zk_hosts, None, "acl", "digest", "a:b", stdin="pw\n")
    assert code == 2 and "invalid user name" in err and "without ':'" in err
    code, _, err = cli(zk_hosts, None, "acl", "digest", " ", stdin="pw\n")
    assert code == 2 and "invalid user name ' ': give a name that is not blank" in err
    code, _, err = cli(zk_hosts, None, "acl", "digest", "someone", stdin="\n")
    assert code == 2 and "empty password" in err


def test_digest_ids_are_zookeepers() -> None:
    assert digest_id("loader", "push-pw") == make_digest_acl_credential("loader", "push-pw")


def test_every_place_is_known_and_no_role_deletes_what_it_does_not_own() -> None:
    expected = {
        "": Place.FOLDER,
        "/tables": Place.FOLDER,
        "/names/events": Place.GUARD,
        "/clock": Place.CLOCK,
        "/acl": Place.POLICY,
        "/tables/events": Place.HEAD,
        "/tables/events/blobs/ab12": Place.BLOB,
        "/tables/events/versions/v-0000000001": Place.VERSION,
        "/tables/events/gc": Place.GC,
        "/tables/events/owners/x": Place.OWNER,
        "/tables/events/owners/by-loader": Place.OWN_OWNERS,
        "/tables/events/owners/by-loader/x": Place.OWNER,
        "/tables/events/leases/lease-0000000001": Place.LEASE,
        "/tables/events/leases/by-analyst": Place.OWN_LEASES,
        "/tables/events/leases/by-analyst/lease-0000000001": Place.LEASE,
        "/tables/events/leases/by-analyst/lease-0000000001/x": None,
        "/tables/events/leases/lease-0000000001/x": None,
        "/tables/events/passes": Place.RETENTION_HOLDS,
        "/tables/events/passes/lock": Place.RETENTION_HOLD,
        "/tables/events/mirror": Place.MIRROR_HOLDS,
        "/tables/events/mirror/lock": Place.MIRROR_HOLD,
        "/tables/events/queue": Place.QUEUE,
        "/tables/events/queue/t-0000000001": Place.TICKET,
        "/leaders/retention": Place.ELECTION,
        "/leaders/retention/member-0000000001": Place.MEMBER,
        "/tables/events/other": None,
        "/stranger": None,
    }
    for path, place in expected.items():
        assert place_of(path) is place, path
    for place, rights in RIGHTS.items():
        assert set(rights) == set(ROLES), place
        assert all(r & ALL == r and r & 16 == 0 for r in rights.values()), place  # nobody but admins
    deleters = {(p, r) for p, rights in RIGHTS.items() for r, bits in rights.items() if bits & 8}
    assert deleters == {
        (Place.BLOBS, "retention"),
        (Place.VERSIONS, "retention"),
        (Place.ELECTION, "retention"),
        (Place.RETENTION_HOLDS, "retention"),
        # A commit queue's tickets order writers and guard nothing: a writer
        # whose ticket another deletes only takes a new one (liveness, as the floor).
        (Place.QUEUE, "pusher"),
        (Place.QUEUE, "retention"),
        # Both publish to a table's mirror after their commits, one at a time.
        # A hold another deletes only stops that publish before its next
        # commit (a publisher asks for its hold first): nothing is lost.
        (Place.MIRROR_HOLDS, "pusher"),
        (Place.MIRROR_HOLDS, "retention"),
    }
    # A pusher's claims and a reader's leases: only in the folder of that one identity.
    policy = AclPolicy.build([ident(ADMIN_ROLE)], [ident("pusher")], [ident("retention")], [ident("reader")])
    for place, role in ((Place.OWN_OWNERS, "pusher"), (Place.OWN_LEASES, "reader")):
        other = digest_id("someone", "else")
        wider = AclPolicy.build(
            policy.admin, *([*policy.ids(r), other] if r == role else policy.ids(r) for r in ROLES)
        )
        granted = dict(wider.grants(place, owner=ident(role)))
        assert granted[ident(role)] == READ | CREATE | DELETE and granted[other] == READ, place
        assert wider.owner_of(place, f"by-{IDENTITIES[role].partition(':')[0]}") == ident(role)
        assert dict(wider.grants(place))[ident(role)] == READ  # a folder nobody owns


def test_the_policy_record_round_trips_and_fails_closed() -> None:
    policy = AclPolicy.build([ident(ADMIN_ROLE)], [ident("pusher")], [ident("retention")], [ident("reader")])
    assert codec.decode_policy(codec.encode_policy(policy), "/acl") == policy
    assert policy.role_of(ident("reader")) == "reader" and policy.role_of("x:y") is None
    bad = codec.encode_policy(policy).replace(b'"admin":[', b'"admin":["nope",')
    with pytest.raises(CorruptRecordError, match="invalid digest id"):
        codec.decode_policy(bad, "/acl")
    with pytest.raises(InvalidInputError, match="at least one admin"):
        AclPolicy.build([])


SECRET = "Zq9-very-secret-pw"


def test_no_secret_in_logs_errors_or_verbose_tracebacks(
    zk_hosts: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(1)  # everything, kazoo's request dumps included
    owner = f"owner:{SECRET}"
    unreachable = f"127.0.0.1:{free_port()}"
    runs: list[tuple[str, str | None, list[str], int]] = [
        (zk_hosts, owner, ["table", "create", T, "--root", str(tmp_path / T)], 0),
        (zk_hosts, owner, ["table", "show", T], 0),
        (zk_hosts, owner, ["table", "show", "missing"], 3),
        (zk_hosts, f"owner:x{SECRET}", ["table", "show", T], 1),  # another password: refused
        (zk_hosts, owner, ["table", "create", "t2", "--root", f"s3://AKIA:{SECRET}@bucket/x"], 2),
        (zk_hosts, owner, ["table", "create", "t3", "--root", f"s3://bucket/x?secret_key={SECRET}"], 2),
        (zk_hosts, owner, ["acl", "apply", "--pusher", f"loader:{SECRET}"], 2),
        (zk_hosts, f":{SECRET}", ["table", "show", T], 2),  # malformed: no user
        (unreachable, owner, ["table", "show", T], 1),
    ]
    for zk, auth, args, want in runs:
        code, out, err = cli(zk, auth, "--verbose", *args)
        assert code == want, (args, out, err)
        assert SECRET not in out + err, (args, out, err)
    m = LineageManager(store_as(zk_hosts, owner))
    try:
        push_arrow(m, T, [rows("a", 2)])
        assert content(m) == ["a", "a"]
        assert repr(ZkSettings(hosts=zk_hosts, auth=owner)).count(SECRET) == 0
    finally:
        m.store.close()
    assert "Sending request" in caplog.text  # kazoo's dumps were on, and scrubbed
    assert SECRET not in caplog.text


def test_the_security_page_shows_the_rights_in_force() -> None:
    text = (REPO / "docs" / "security.md").read_text()
    for place, rights in RIGHTS.items():
        rows = [line for line in text.splitlines() if line.startswith(f"| {place.value} |")]
        assert len(rows) == 1, place
        cells = [c.strip() for c in rows[0].strip().strip("|").split("|")]
        assert cells[2:] == [rights_text(rights[r]) for r in ROLES], place


def test_config_show_and_push_conf_mask_secrets(zk_hosts: str, tmp_path: Path) -> None:
    endpoint = f"http://minio-user:{SECRET}@127.0.0.1:9000"
    env = {"LINEAGE_ZK_AUTH": "", "LINEAGE_S3_ENDPOINT": endpoint}
    for args in (["config", "show"], ["--json", "config", "show"]):
        result = runner.invoke(app, ["--zk", zk_hosts, *args], env=env)
        assert result.exit_code == 0, result.stderr
        assert SECRET not in result.stdout and "minio-user" not in result.stdout, result.stdout
        assert "http://****@127.0.0.1:9000" in result.stdout

    code, _, err = cli(zk_hosts, None, "table", "create", T, "--root", str(tmp_path / T))
    assert code == 0, err
    store = store_as(zk_hosts, None)
    try:
        before = dump(store.client)
        bad = [
            (f"fs.s3a.secret.key={SECRET}", "'fs.s3a.secret.key=****'"),
            (f"hadoop.fs.s3a.session.token={SECRET}", "'hadoop.fs.s3a.session.token=****'"),
            (f"ssl.keyStorePassword={SECRET}", "'ssl.keyStorePassword=****'"),
            (f"fs.s3a.endpoint=https://u:{SECRET}@s3.example", "'fs.s3a.endpoint=https://****@s3.example'"),
            (f"https://u:{SECRET}@s3.example", "'https://****@s3.example'"),
        ]
        for item, shown in bad:
            code, out, err = cli(
                zk_hosts, None, "--verbose", "push", T, "--input", str(tmp_path), "--conf", item
            )
            assert code == 2 and f"invalid --conf {shown}" in err, (item, err)
            assert SECRET not in out + err, (item, out, err)
        assert dump(store.client) == before
    finally:
        store.close()


def world_may(client: KazooClient, path: str) -> int:
    acls, _ = client.get_acls(path)
    return sum(a.perms for a in acls if a.id.scheme == "world")


def test_an_anonymous_first_run_leaves_nothing_open_after_an_authenticated_one(
    zk_hosts: str, tmp_path: Path
) -> None:
    owner = "owner:owner-pw"
    code, _, err = cli(zk_hosts, None, "table", "create", "early", "--root", str(tmp_path / "early"))
    assert code == 0, err
    anonymous = store_as(zk_hosts, None)
    try:
        shared = [ROOT, f"{ROOT}/tables", f"{ROOT}/names", f"{ROOT}/clock", f"{ROOT}/names/early"]
        assert all(world_may(anonymous.client, p) == ALL for p in shared)  # the anonymous run left them open

        code, _, err = cli(zk_hosts, owner, "table", "create", T, "--root", str(tmp_path / T))
        assert code == 0, err
        owner_store = store_as(zk_hosts, owner)
        try:
            closed = [p for p in walk(owner_store.client, ROOT) if world_may(owner_store.client, p)]
            assert closed == [], closed  # every node, the early table's included, is the owner's now
            before = dump(owner_store.client)
            attacks = [
                ("delete the clock", lambda: anonymous.client.delete(f"{ROOT}/clock")),
                ("squat a name", lambda: anonymous.client.create(f"{ROOT}/names/squat", b"squat")),
                ("make a case twin", lambda: anonymous.client.create(f"{ROOT}/tables/Events", b"{}")),
                ("take a guard", lambda: anonymous.client.delete(f"{ROOT}/names/early")),
                ("rewrite a guard", lambda: anonymous.client.set(f"{ROOT}/names/early", b"x")),
                ("rewrite a head", lambda: anonymous.client.set(f"{ROOT}/tables/early", b"x")),
            ]
            for what, attack in attacks:
                with pytest.raises(NoAuthError):
                    attack()
                    pytest.fail(what)
            assert dump(owner_store.client) == before

            # The clock's loss is survived, by a store that made sure of it before and by a new one.
            m = LineageManager(owner_store)
            push_arrow(m, T, [rows("a", 2)])
            owner_store.client.delete(f"{ROOT}/clock")
            push_arrow(m, T, [rows("b", 3)])
            assert content(m) == ["b"] * 3
            owner_store.client.delete(f"{ROOT}/clock")
            code, _, err = cli(zk_hosts, owner, "segment", "add", T, "s1", "--no-check")
            assert code == 0, err
        finally:
            owner_store.close()
    finally:
        anonymous.close()


def test_an_open_node_this_identity_cannot_close_is_refused_by_name(zk_hosts: str) -> None:
    code, _, err = cli(zk_hosts, None, "table", "list")
    assert code == 0, err
    anonymous = store_as(zk_hosts, None)
    try:
        # Anyone may write it, but nobody may administer it.
        anonymous.client.set_acls(f"{ROOT}/clock", [ACL(READ | WRITE | CREATE | DELETE, ANYONE_ID_UNSAFE)])
        code, _, err = cli(zk_hosts, "owner:owner-pw", "table", "list")
        assert code == 1 and f"{ROOT}/clock is open to anyone" in err and "acl apply" in err, err
    finally:
        anonymous.close()


SECOND = {"pusher": "loader2:push2-pw", "reader": "analyst2:read2-pw"}


def second(role: str) -> str:
    user, _, password = SECOND[role].partition(":")
    return digest_id(user, password)


def test_ephemerals_are_deletable_by_their_identity_only_and_bad_leases_are_ignored(
    zk_hosts: str, tmp_path: Path
) -> None:
    admin_auth = IDENTITIES[ADMIN_ROLE]
    args = ["--pusher", ident("pusher"), "--pusher", second("pusher"), "--retention", ident("retention")]
    args += ["--reader", ident("reader"), "--reader", second("reader")]
    code, _, err = cli(zk_hosts, admin_auth, "acl", "apply", *args)
    assert code == 0, err
    code, _, err = cli(  # made under the policy: the table gets every pusher's and reader's own folder
        zk_hosts, admin_auth, "table", "create", T, "--root", str(tmp_path / T), "--replaced-retention", "0s"
    )
    assert code == 0, err
    pusher, pusher2, reader, reader2 = (
        store_as(zk_hosts, auth)
        for auth in (IDENTITIES["pusher"], SECOND["pusher"], IDENTITIES["reader"], SECOND["reader"])
    )
    head = f"{ROOT}/tables/{T}"
    try:
        push_arrow(LineageManager(pusher), T, [rows("old", 2)])
        lease = LineageManager(reader).pin_readable(T)
        assert lease.lease_id.startswith("by-analyst/lease-")
        lease_path = f"{head}/leases/{lease.lease_id}"
        push_arrow(LineageManager(pusher2), T, [rows("new", 3)])  # replaces what the reader holds

        # Another reader can neither delete the lease, nor create beside it, nor squat a folder.
        for attempt in (
            lambda: reader2.client.delete(lease_path),
            lambda: reader2.client.create(f"{head}/leases/by-analyst/lease-x", b"", ephemeral=True),
            lambda: reader2.client.create(f"{head}/leases/by-newcomer", b""),
            lambda: reader2.client.create(f"{head}/leases/lease-flat", b"", ephemeral=True),
        ):
            with pytest.raises(NoAuthError):
                attempt()
        with pytest.raises(AuthError, match="not authorised"):
            reader2.pins.release(lease)
        assert reader.client.exists(lease_path) is not None

        # A pusher cannot take another push's owner claim away.
        entry = "0b5e2f4c-1111-4a6e-9c3d-4b2a1f0e9d8c"
        pusher.holds("owner").hold(T, entry)
        claim = f"{head}/owners/by-loader/{entry}"
        assert reader.client.exists(claim) is not None and entry in pusher2.holds("owner").live(T)
        with pytest.raises(NoAuthError):
            pusher2.client.delete(claim)
        pusher2.holds("owner").release(T, entry)  # releases only in its own folder: nothing there
        assert pusher.client.exists(claim) is not None
        pusher.holds("owner").release(T, entry)
        assert pusher.client.exists(claim) is None

        # The second reader plants bad leases in its own folder: retention ignores and reports them,
        # and keeps honouring the good lease.
        mine = f"{head}/leases/by-analyst2"
        good = codec.decode_lease(reader.client.get(lease_path)[0], lease_path)
        planted = [
            b"not json",
            codec.encode_lease(
                codec.LeaseRecord(good.version, {**good.buckets, "segments": ("../../../acl",)}, ())
            ),
            codec.encode_lease(
                codec.LeaseRecord(good.version, {**good.buckets, "segments": ("ab" * 16,)}, ())
            ),
        ]
        for raw in planted:
            acl = reader2.nodes.acl_at(Place.LEASE)
            reader2.client.create(f"{mine}/lease-", raw, acl=acl, ephemeral=True, sequence=True)
        reader2.client.create(f"{mine}/lease-", b"hidden", ephemeral=True, sequence=True)  # analyst2 only
        old_files = sorted(str(p) for p in (tmp_path / T).rglob("*.parquet"))
        code, out, err = cli(
            zk_hosts, IDENTITIES["retention"], "--json", "retention", "run", "--table", T, "--force"
        )
        assert code == 0, out + err
        [report] = json.loads(out)
        ignored = report["leases_ignored"]
        assert len(ignored) == 4 and all(mine in why for why in ignored), ignored
        assert sum("not readable" in why for why in ignored) == 1
        assert any("not valid JSON" in why for why in ignored)
        assert sorted(str(p) for p in (tmp_path / T).rglob("*.parquet")) == old_files  # the pinned file stays
        code, out, err = cli(zk_hosts, IDENTITIES["retention"], "retention", "run", "--table", T, "--force")
        assert code == 0 and "4 malformed lease(s) ignored" in out and err.count("warning: ignored") == 4, (
            out + err
        )

        reader.pins.release(lease)
        code, out, err = cli(zk_hosts, IDENTITIES["retention"], "retention", "run", "--table", T, "--force")
        assert code == 0, out + err
        assert len(list((tmp_path / T).rglob("*.parquet"))) == 1  # released: the replaced file goes
        assert content(LineageManager(reader2)) == ["new"] * 3
        code, out, err = cli(zk_hosts, IDENTITIES["reader"], "read", T)
        assert code == 0 and "new" in out, err
        code, _, err = cli(zk_hosts, admin_auth, "table", "drop", T, "--force")
        assert code == 0, err
    finally:
        for store in (pusher, pusher2, reader, reader2):
            store.close()


def test_a_role_is_checked_against_the_policy_when_first_wanted_not_at_a_first_read_long_before(
    secured: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new client sends its first contact (the policy's read) with its
    first read; a long-lived client that wants the policy only later reads
    it then: demoted meanwhile, it is told its role, not refused by
    ZooKeeper without one (an outside trial found the answer of the first
    read relied on)."""
    from segment_lineage.lineage.zk.store import nodes

    monkeypatch.setattr(nodes, "SHARED_FRESH_S", 0.05)
    pusher = store_as(secured, IDENTITIES["pusher"])
    try:
        m = LineageManager(pusher, claims=RootClaimFiles())
        version = m.table(T).version  # the first read: the first contact goes with it
        digests = {}
        for role in ("pusher", "retention", "reader"):
            user, _, password = IDENTITIES[role].partition(":")
            code, out, err = cli(secured, None, "acl", "digest", user, stdin=password + "\n")
            assert code == 0, err
            digests[role] = out.strip()
        demoted = [
            "--retention",
            digests["retention"],
            "--reader",
            digests["reader"],
            "--reader",
            digests["pusher"],
        ]
        code, out, err = cli(secured, IDENTITIES[ADMIN_ROLE], "acl", "apply", *demoted)
        assert code == 0, err
        time.sleep(0.1)
        with pytest.raises(AuthError, match="needs the pusher role"):
            m.rollback(T, version)
    finally:
        pusher.close()
