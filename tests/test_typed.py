"""TypedCheckpointer over memory, the local archive and S3: pydantic states in, pydantic states out."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic import BaseModel, Field

import ckpt_archive as ca
from ckpt_archive.testing import S3Server
from ckpt_archive.typed import TYPED_KEY, TypedCheckpointer

from .conftest import open_backend


class Item(BaseModel):
    name: str
    qty: int = 1


class Cart(BaseModel):
    owner: str
    items: list[Item] = Field(default_factory=list)
    note: str | None = None


class StricterCart(BaseModel):
    owner: str
    items: list[Item]
    total: float  # a field added later, without a default


BACKENDS = ["memory", "delta-memory", "archive-local", "archive-s3"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, archive_url: Any) -> Any:
    if request.param == "memory":
        return ca.MemoryCheckpointer()
    if request.param == "delta-memory":
        return ca.DeltaCheckpointer(ca.MemoryCheckpointer(), ca.DeltaConfig(full_snapshot_interval=3))
    return open_backend(archive_url, request.param.removeprefix("archive-"), full_snapshot_interval=3)


def fill(typed: TypedCheckpointer[Cart], n: int) -> list[str]:
    ids = []
    for i in range(n):
        cart = Cart(owner="ada", items=[Item(name=f"item-{j}", qty=j + 1) for j in range(i + 1)])
        ids.append(typed.save(cart, recursion_count=i * 2))
    return ids


def test_save_load_list_last(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart-1")
    assert typed.list() == [] and typed.last() is None and typed.snapshots() == []
    ids = fill(typed, 5)
    assert typed.list() == ids  # oldest first
    loaded = typed.load(ids[2])
    assert isinstance(loaded, Cart) and loaded == Cart(
        owner="ada", items=[Item(name=f"item-{j}", qty=j + 1) for j in range(3)]
    )
    last = typed.last()
    assert last is not None and last[0].items[-1].name == "item-4" and last[1] == 8
    other = TypedCheckpointer(Cart, backend, "cart-2")
    other.save(Cart(owner="bob"), recursion_count=0)
    assert typed.list() == ids and len(other.list()) == 1
    with pytest.raises(ca.CheckpointNotFound, match="cart-2"):
        other.load(ids[0])  # another thread's checkpoint is not this thread's


def test_snapshots(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    ids = fill(typed, 4)
    snaps = typed.snapshots()
    assert [s.checkpoint_id for s in snaps] == ids
    assert [s.sequence for s in snaps] == [1, 2, 3, 4]
    assert [s.recursion_count for s in snaps] == [0, 2, 4, 6]
    assert [len(s.state.items) for s in snaps] == [1, 2, 3, 4]
    assert all(s.version == 1 for s in snaps)
    assert [s.created_at for s in snaps] == sorted(s.created_at for s in snaps)


def test_metadata_records_recursion_and_model(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    cid = typed.save(Cart(owner="ada"), recursion_count=3)
    meta = backend.load_by_id(cid).metadata[TYPED_KEY]
    assert meta == {"recursion_count": 3, "model": f"{Cart.__module__}.Cart"}


def test_state_that_no_longer_validates_names_checkpoint_and_field(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    cid = typed.save(Cart(owner="ada", items=[Item(name="x")]), recursion_count=0)
    stricter = TypedCheckpointer(StricterCart, backend, "cart")
    with pytest.raises(ca.StateValidationError) as info:
        stricter.load(cid)
    message = str(info.value)
    assert cid in message and "'total'" in message and "StricterCart" in message
    assert info.value.checkpoint_id == cid and info.value.fields == ["total"]  # type: ignore[attr-defined]
    assert isinstance(info.value, ca.InvalidState)
    with pytest.raises(ca.StateValidationError):
        stricter.last()
    with pytest.raises(ca.StateValidationError):
        stricter.snapshots()


def test_bad_input_is_refused() -> None:
    typed = TypedCheckpointer(Cart, ca.MemoryCheckpointer(), "cart")
    with pytest.raises(ca.InvalidState, match="Cart"):
        typed.save(Item(name="not a cart"), recursion_count=0)  # type: ignore[arg-type]
    with pytest.raises(ca.InvalidState, match="recursion_count"):
        typed.save(Cart(owner="a"), recursion_count=-1)
    with pytest.raises(TypeError):
        TypedCheckpointer(dict, ca.MemoryCheckpointer(), "cart")  # type: ignore[type-var]
    with pytest.raises(ca.InvalidIdentifier):
        TypedCheckpointer(Cart, ca.MemoryCheckpointer(), "")
    assert typed.list() == []


def test_async_twins(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")

    async def run() -> None:
        first = await typed.asave(Cart(owner="ada"), 1)
        await typed.asave(Cart(owner="ada", note="second"), 2)
        assert (await typed.aload(first)).note is None
        assert await typed.alist() == typed.list()
        last = await typed.alast()
        assert last is not None and last[0].note == "second" and last[1] == 2
        assert [s.sequence for s in await typed.asnapshots()] == [1, 2]

    asyncio.run(run())


def test_update_state_versions(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    ids = fill(typed, 3)
    assert typed.update_state(ids[1], Cart(owner="ada", note="edited"), expected_version=1) == 2
    assert typed.load(ids[1]).note == "edited"
    raw = backend.list("cart")  # every backend here edits in place and keeps the version
    assert [i.checkpoint_id for i in raw] == ids and [i.version for i in raw] == [1, 2, 1]
    assert [s.version for s in typed.snapshots()] == [1, 2, 1]
    with pytest.raises(ca.CheckpointVersionConflict):
        typed.update_state(ids[1], Cart(owner="stale"), expected_version=1)
    assert typed.load(ids[1]).note == "edited"  # nothing changed
    assert typed.update_state(ids[1], Cart(owner="ada", note="again"), expected_version=2) == 3
    assert typed.load(ids[0]) == Cart(owner="ada", items=[Item(name="item-0", qty=1)])  # others untouched
    with pytest.raises(ca.CheckpointNotFound):
        TypedCheckpointer(Cart, backend, "other").update_state(ids[0], Cart(owner="x"), expected_version=1)


def test_concurrent_editors_one_wins(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    (cid,) = fill(typed, 1)

    async def edit(note: str) -> int:
        return await typed.aupdate_state(cid, Cart(owner="ada", note=note), expected_version=1)

    async def both() -> list[Any]:
        return await asyncio.gather(edit("a"), edit("b"), return_exceptions=True)

    results = asyncio.run(both())
    assert sorted(map(str, results)).count("2") == 1
    assert sum(isinstance(r, ca.CheckpointVersionConflict) for r in results) == 1
    assert typed.load(cid).note in ("a", "b")


def test_delete(backend: Any) -> None:
    typed = TypedCheckpointer(Cart, backend, "cart")
    ids = fill(typed, 4)
    typed.delete(ids[1])
    assert typed.list() == [ids[0], *ids[2:]]
    assert [s.sequence for s in typed.snapshots()] == [1, 2, 3]
    assert typed.load(ids[2]).items[-1].name == "item-2"  # a child of the deleted one still loads
    with pytest.raises(ca.CheckpointNotFound):
        typed.load(ids[1])
    with pytest.raises(ca.CheckpointNotFound):
        typed.delete(ids[1])

    async def adelete() -> None:
        await typed.adelete(ids[3])

    asyncio.run(adelete())
    last = typed.last()
    assert last is not None and len(last[0].items) == 3


def test_edit_records_on_a_backend_without_in_place_edits() -> None:
    """A backend that cannot edit in place keeps edits and deletions as hidden records."""
    backend = ca.DeltaCheckpointer(ca.open_archive(f"memory://typed-{uuid.uuid4().hex}"))  # no in-place edits
    with pytest.raises(NotImplementedError):
        backend.update_state("x", {}, 1)
    typed = TypedCheckpointer(Cart, backend, "cart")
    ids = fill(typed, 2)
    typed.update_state(ids[0], Cart(owner="ada", note="v2"), expected_version=1)
    typed.delete(ids[1])
    assert typed.list() == [ids[0]]
    assert typed.load(ids[0]).note == "v2" and typed.last() == (Cart(owner="ada", note="v2"), 0)
    raw = [i.checkpoint_id for i in backend.list("cart")]
    assert raw == [*ids, f"{ids[0]}~v2", f"{ids[1]}~deleted"]  # the old state and the deleted one stay stored
    assert backend.load_by_id(ids[0]).state == Cart(owner="ada", items=[Item(name="item-0")]).model_dump()  # type: ignore[union-attr]
    stricter = TypedCheckpointer(StricterCart, backend, "cart")
    with pytest.raises(ca.StateValidationError, match=ids[0]):  # names the checkpoint, not its edit record
        stricter.load(ids[0])


def test_snapshots_read_the_history_in_one_pass(s3_server: S3Server, s3_url: str) -> None:
    archive = ca.open_archive(s3_url, storage_options=s3_server.storage_options(), full_snapshot_interval=10)
    fill(TypedCheckpointer(Cart, archive, "cart"), 30)
    fresh = ca.open_archive(s3_url, storage_options=s3_server.storage_options())
    s3_server.reset_counts()
    snaps = TypedCheckpointer(Cart, fresh, "cart").snapshots()
    assert [len(s.state.items) for s in snaps] == list(range(1, 31))
    assert s3_server.total() < 30  # not one load (an id lookup, a probe, a payload) per checkpoint
