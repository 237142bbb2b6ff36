"""Reading a folded manifest with its sealed parts: the one read of a fold, for the log and verify.

The decoding is the format's (``format.parts``, pure); only the reads of the parts are here.
"""

from __future__ import annotations

from ..format.manifest import Manifest
from ..format.parts import checked_part_refs, with_parts
from ..storage import ObjectStore


async def read_folded(
    store: ObjectStore, thread_id: str, data: bytes, what: str, *, key: str | None = None, seq: int | None = None
) -> Manifest:
    """A folded manifest with its sealed parts read (in parallel) and checked."""
    refs = checked_part_refs(data, what, thread_id=thread_id, key=key)
    datas = await store.get_many([ref["key"] for ref in refs]) if refs else []
    return with_parts(data, what, refs, datas, thread_id=thread_id, key=key, seq=seq)
