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
