"""Object stores through their async fsspec clients: s3fs, gcsfs, adlfs.

Put-if-absent is the service's own conditional create, ``_pipe_file(mode="create")``: S3 sends
``If-None-Match: *``, GCS ``ifGenerationMatch=0``, Azure an ``If-None-Match`` condition; a loser
gets ``FileExistsError``.

A read is one ranged GET from byte 0 (``start=0``: s3fs sends no sizing HEAD first). An archive object
of a bounded kind is read to at most one byte past its bound (``limits.stored_limit``), so an
oversized one is refused with no more than that downloaded, as ``fstat`` refuses it unread on local
disk; the one request stays one. A range from byte 0 of an empty object is answered 416 by every
service: that reply is the empty object (``failures.empty_object``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Unpack

import fsspec

from .. import limits
from .base import Listing, ObjectStore, StoreOptions
from .failures import empty_object, unless_absent
from .listing import listing, names

OBJECT_STORE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "az", "abfss", "adl"})


def protocols(fs: fsspec.AbstractFileSystem) -> set[str]:
    proto = fs.protocol
    return {proto} if isinstance(proto, str) else set(proto)


class FsspecObjectStore(ObjectStore):
    """An S3, GCS or Azure bucket (or a prefix in one) through its async fsspec filesystem."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root: str, **options: Unpack[StoreOptions]) -> None:
        super().__init__(root, fs=fs, **options)

    @property
    def list_with_lsdir(self) -> bool:
        """s3fs's ``_ls`` lists the parent again when a folder is empty (is it a file?): a second,
        possibly long LIST for every empty folder. Its ``_lsdir`` is the one LIST we want."""
        return "s3" in protocols(self.fs)

    @property
    def multipart_uploads(self) -> bool:
        """The S3 API of multipart uploads, for ``abort_stale_uploads`` (gcsfs and adlfs have none)."""
        return hasattr(self.fs, "_call_s3")

    async def _get(self, key: str, kind: str | None) -> bytes:
        try:
            data = bytes(await self.fs._cat_file(self.path(key), start=0, end=limits.read_end(kind)))
        except Exception as exc:
            if empty_object(exc):
                return b""
            raise
        return limits.check_cut(kind, data, key=key)

    async def _list_dir(self, prefix: str) -> list[str]:
        path = self.path(prefix)
        # adlfs ignores ``refresh`` (its flag is ``invalidate_cache``): drop the listing cache for all
        self.fs.invalidate_cache(path)
        if self.list_with_lsdir:
            entries = [e["name"] for e in await self.fs._lsdir(path, refresh=True)]
        else:
            entries = await self.fs._ls(path, detail=False, refresh=True)
        return names(path, entries)

    async def _find(self, prefix: str) -> Listing:
        return listing(self.root, await self.fs._find(self.path(prefix), detail=True))

    async def _put(self, key: str, data: bytes) -> None:
        await self.fs._pipe_file(self.path(key), data)

    async def _create(self, key: str, data: bytes) -> bool:
        try:
            await self.fs._pipe_file(self.path(key), data, mode="create")
        except FileExistsError:
            return False
        return True

    async def _copy(self, src: str, dst: str) -> None:
        await self.fs._cp_file(self.path(src), self.path(dst))

    async def _delete(self, keys: Sequence[str]) -> None:
        paths = [self.path(k) for k in keys]
        with unless_absent():
            await self.fs._rm(paths)

    async def _delete_prefix(self, prefix: str) -> None:
        path = self.path(prefix)
        with unless_absent():
            await self.fs._rm(path, recursive=True)

    async def _abort_stale_uploads(self, before: datetime, owned: Callable[[str], bool]) -> int:
        if not self.multipart_uploads:
            return 0
        bucket, _, prefix = self.root.partition("/")
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": f"{prefix}/" if prefix else ""}
        aborted = 0
        while True:
            page = await self.fs._call_s3("list_multipart_uploads", **kwargs)
            for upload in page.get("Uploads", []):
                initiated, key = upload.get("Initiated"), str(upload.get("Key", ""))
                if not key.startswith(kwargs["Prefix"]) or not owned(key[len(kwargs["Prefix"]) :]):
                    continue  # not one of the archive's objects
                if isinstance(initiated, datetime) and initiated.astimezone(UTC) <= before:
                    await self.fs._call_s3(
                        "abort_multipart_upload", Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"]
                    )
                    aborted += 1
            if not page.get("IsTruncated"):
                return aborted
            kwargs.update(KeyMarker=page.get("NextKeyMarker"), UploadIdMarker=page.get("NextUploadIdMarker"))
