"""A local ZooKeeper server knows itself: another server answering on its
port (one that took the port while this one started) is not taken for it."""

from __future__ import annotations

from pathlib import Path

import pytest

import segment_lineage.lineage.zk.server as server_module
from segment_lineage.lineage.core.errors import ServerError
from segment_lineage.lineage.zk.server import ZkServer

pytestmark = [pytest.mark.zk]


def test_another_server_on_the_port_is_not_this_one(zk_server: ZkServer, tmp_path: Path) -> None:
    other = ZkServer(tmp_path / "other", zk_server.client_port)
    assert zk_server.is_serving()
    assert not other.is_serving()


def test_a_start_that_lost_its_port_to_another_server_fails_and_says_so(
    zk_server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two servers given the same free port: the second's look at the port
    came before the first listened (the look is made to miss here), so it
    starts, cannot bind, and exits. Its start must fail, not return because
    the first answers: every client would then talk to the wrong server."""
    real = server_module.four_letter
    looked: list[str] = []

    def first_look_misses(port: int, word: str = "ruok", *args: object, **kwargs: object) -> str | None:
        looked.append(word)
        return None if len(looked) == 1 else real(port, word, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(server_module, "four_letter", first_look_misses)
    late = ZkServer(tmp_path / "late", zk_server.client_port)
    try:
        with pytest.raises(ServerError, match="exited during start-up") as failed:
            late.start()
        assert "Address already in use" in str(failed.value)
    finally:
        late.stop()
    assert zk_server.is_serving()


def test_a_server_that_may_not_say_its_directory_is_this_one_only_if_its_process_listens(
    zk_server: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server started before 'conf' was allowed refuses the question: it
    counts as this one only when this one's process holds the port."""
    real = server_module.four_letter

    def old_config(port: int, word: str = "ruok", *args: object, **kwargs: object) -> str | None:
        if word == "conf":
            return "conf is not executed because it is not in the whitelist.\n"
        return real(port, word, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(server_module, "four_letter", old_config)
    assert zk_server.is_serving()  # its process listens on the port
    other = ZkServer(tmp_path / "other", zk_server.client_port)
    assert not other.is_serving()  # no process of its own
    other.directory.mkdir(parents=True)
    other.pid_file.write_text(f"{zk_server.pid()}\n")  # a ZooKeeper alive, and listening: its own
    assert other.is_serving()


def test_a_server_under_a_non_ascii_folder_starts_and_keeps_its_data_there(tmp_path: Path) -> None:
    """Java reads its configuration as ISO-8859-1: a data directory under
    'hömé 😀' was read as another folder (one without the state marker), and
    the server was never taken for this one."""
    from segment_lineage.lineage.zk.server import free_port

    server = ZkServer(tmp_path / "hömé 😀" / "zk", free_port())
    try:
        server.start(wait=False)
        server.wait_serving(30)
        assert server.is_serving()
        assert (server.directory / "data" / "version-2").is_dir()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["hömé 😀"]
    finally:
        server.stop()
