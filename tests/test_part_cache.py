"""The engine's part cache (``Contents.part``): what LangGraph history walks and the offline reader keep
of many states (carried writes, seed entries) and of the write objects read apart, for every saver and
reader on one archive. Bounded by entries and JSON bytes whatever is put in, its byte count exact, an
edit or a delete of a record never leaving a part of it behind."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ckpt_archive as ca
from ckpt_archive import codec
from ckpt_archive._sync import run_sync
from ckpt_archive.engine import contents as EC
from ckpt_archive.format.content import state_key

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 12), st.sampled_from([("writes",), ("channels", "m"), ()])),
        st.tuples(st.just("forget"), st.integers(0, 12), st.just(())),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(OPS, st.integers(1, 5), st.integers(10, 400))
def test_the_part_cache_stays_within_its_bounds(ops: list[Any], most: int, most_bytes: int) -> None:
    old = EC.PART_RECORDS, EC.PART_BYTES
    EC.PART_RECORDS, EC.PART_BYTES = most, most_bytes
    try:
        contents = ca.ArchiveCheckpointer(ca.open_store("memory://part-cache")).engine.contents
        for op, n, path in ops:
            rec = {"id": f"c{n}", "version": 1}
            if op == "put":
                contents.remember_part(state_key(rec), path, {"x": "y" * (n * 7)} if n % 3 else None)
                held, value = contents.part(state_key(rec), path)
                assert held or len(codec.dumps(value)) > most_bytes
            else:
                contents.forget([rec])
                assert all(not contents.part(state_key(rec), p)[0] for p in [("writes",), ("channels", "m"), ()])
            sizes = [size for parts in contents.parts.values() for _, size in parts.values()]
            assert contents.parts_bytes == sum(sizes)
            assert len(contents.parts) <= most
            assert contents.parts_bytes <= most_bytes or len(contents.parts) == 1
    finally:
        EC.PART_RECORDS, EC.PART_BYTES = old


def test_an_edit_is_read_anew(tmp_path: Any) -> None:
    """``aparts`` is keyed by record version: after ``update_state`` the new state's part is read, never
    the old one's."""
    archive = ca.open_archive(str(tmp_path / "a"))
    cid = archive.save(ca.Checkpoint(thread_id="t", step=0, state={"writes": {"a": 1}}))
    assert run_sync(archive.aparts("t", {cid: [("writes",)]}))[cid] == {("writes",): {"a": 1}}
    archive.update_state(cid, {"writes": {"a": 2}}, 1)
    assert run_sync(archive.aparts("t", {cid: [("writes",)]}))[cid] == {("writes",): {"a": 2}}
    assert run_sync(archive.aparts("t", {cid: [("channels", "m")], "nope": [("writes",)]})) == {
        cid: {("channels", "m"): None}
    }
