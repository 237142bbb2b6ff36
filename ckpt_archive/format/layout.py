"""Object keys of an archive, and the reversible encoding of ids into key segments.

Layout under the archive root (see docs/format/spec.md)::

    _archive.json                                   archive root marker (format version)
    thread_id=<enc>/_head.json.zst                  hint: latest commit seq + head chain
    thread_id=<enc>/_log/<seq:020d>.json.zst        commit entries, created put-if-absent
    thread_id=<enc>/_log/<seq:020d>.manifest.json.zst  folded manifest as of seq
    thread_id=<enc>/snapshots/<step:012d>-<enc id>.json.zst
    thread_id=<enc>/snapshots/<step:012d>-<enc id>.<token>.json.zst  re-based/edited/copied snapshot
    thread_id=<enc>/deltas/<step:012d>-<uuid>.parquet   row groups of consecutive checkpoints
    thread_id=<enc>/_parts/<token>.json.zst         sealed parts of folded manifests (parts.py)
    _blobs/<sha256>.zst                             a large string value, shared archive-wide (blobs.py)
    _blobs/<hmac>.enc                               the same, in an encrypted archive (a keyed name)
    _langgraph/writes/<enc thread>/<enc checkpoint>/<uuid7>[.<blob>...].json.zst   LangGraph pending writes
    session_id=<enc>/events/<flush:020d>.parquet    a session's event log, one file per flush

Ids become key segments by ``ids.encode_id`` (percent-encoding, a long id by its sha256). Every key the
package builds is built here: no other module spells a folder or a suffix (``tests/test_layout_keys.py``).
"""

from __future__ import annotations

import bisect
import functools
import re
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ..ids import MAX_SEGMENT as MAX_SEGMENT
from ..ids import decode_id as decode_id
from ..ids import encode_id as encode_id
from ..ids import minted_thread_segment

ARCHIVE_MARKER = "_archive.json"
HEAD = "_head.json.zst"
COMMIT_SUFFIX = ".json.zst"
"""A commit entry's name after its 20-digit seq (a folded manifest's is ``FOLDED_SUFFIX``)."""
FOLDED_SUFFIX = ".manifest.json.zst"
THREAD_PREFIX = "thread_id="
BLOBS = "_blobs"
"""Large string values (``format.blobs``): archive-wide, shared by every thread that holds them."""
SESSION_PREFIX = "session_id="
LANGGRAPH = "_langgraph"
"""The LangGraph saver's pending writes (spec.md section 11): the archive's own, written before the first
commit of a run may create the marker."""
LANGGRAPH_WRITES = f"{LANGGRAPH}/writes"
"""One zstd-sealed object per ``put_writes`` call: ``<enc thread>/<enc checkpoint>/<uuid7>.json.zst``."""
LANGGRAPH_WRITES_SUFFIX = ".json.zst"
"""The name of a LangGraph writes object after its uuid7 (and the names of the blobs it references)."""
WRITES_NAME_BLOBS = 3
"""The most blob names a LangGraph writes object's name lists (``writes_name``): a name of
36 + 3 * 65 + 9 = 240 bytes fits the 255-byte file names of local disks."""
EVENTS = "events"
"""A session's folder of event batches."""
EVENTS_SUFFIX = ".parquet"
LOG = "_log"
PARTS = "_parts"
SNAPSHOTS = "snapshots"
DELTAS = "deltas"
SEGMENT_SUFFIX = ".parquet"
THREAD_FOLDERS = frozenset({LOG, PARTS, SNAPSHOTS, DELTAS})
"""The folders inside a thread's folder; nothing else in it is the archive's."""
PAYLOAD_FOLDERS = (SNAPSHOTS, DELTAS)
"""The thread folders of checkpoint payloads: what records reference, and all a tombstone may name there."""
_TEMP = re.compile(r"\.tmp-[0-9a-f]{32}")
"""A temporary file of a local write (``store._write_local``: ``.tmp-`` + uuid4 hex)."""


def holds_threads(name: str) -> bool:
    """Is ``name`` (directly under the root) where checkpoints live: a thread folder?"""
    return name.startswith(THREAD_PREFIX)


def root_name(name: str) -> bool:
    """Could ``name`` (directly under the root) be the archive's own: marker, thread, session
    or LangGraph folder, or a temporary file of writing the marker?"""
    ours = name in (ARCHIVE_MARKER, LANGGRAPH, BLOBS) or holds_threads(name) or name.startswith(SESSION_PREFIX)
    return ours or bool(_TEMP.fullmatch(name))


def own_temp(key: str) -> bool:
    """Is ``key`` a temporary file of an interrupted local write in one of the archive's own folders?

    gc removes only these: a user's ``.tmp-*`` file elsewhere under the root is not the archive's.
    """
    *folders, name = key.split("/")
    if not _TEMP.fullmatch(name):
        return False
    if len(folders) <= 1:
        return not folders or folders[0] == BLOBS or folders[0].startswith(THREAD_PREFIX)
    if len(folders) == 2:
        top, sub = folders
        return (top.startswith(THREAD_PREFIX) and sub in THREAD_FOLDERS) or (
            top.startswith(SESSION_PREFIX) and sub == EVENTS
        )
    return False


@functools.lru_cache(maxsize=4096)  # every key of a thread starts with it, and every record check
def thread_dir(thread_id: str) -> str:
    return THREAD_PREFIX + encode_id(thread_id, "thread_id")


def minted_thread_dir(checkpoint_id: str) -> str | None:
    """The thread folder a checkpoint id minted by the archive names (``ids.mint_checkpoint_id``), or
    None for a foreign id: where ``load_by_id`` looks first."""
    segment = minted_thread_segment(checkpoint_id)
    return None if segment is None else THREAD_PREFIX + segment


def folder_of(rel: str) -> str | None:
    """The thread folder (``_log``, ``snapshots``...) a key relative to its thread's folder lies directly
    in, or None: anything deeper or elsewhere is not the archive's."""
    folder, sep, name = rel.partition("/")
    return folder if sep and name and "/" not in name and folder in THREAD_FOLDERS else None


def head_key(thread_id: str) -> str:
    return folder_head_key(thread_dir(thread_id))


def folder_head_key(folder: str) -> str:
    """The head hint in the thread folder ``folder`` (a name as listed, whose thread id may be hashed)."""
    return f"{folder}/{HEAD}"


def log_dir(thread_id: str) -> str:
    """The thread's ``_log`` folder (commit entries and folded manifests), without a trailing slash."""
    return f"{thread_dir(thread_id)}/{LOG}"


def segments_dir(folder: str) -> str:
    """The ``deltas`` folder of the thread folder ``folder``."""
    return f"{folder}/{DELTAS}"


DELTA_GLOB = f"{THREAD_PREFIX}*/{DELTAS}/*{SEGMENT_SUFFIX}"
"""Where the delta segments are, relative to the archive root (for DuckDB, Dask, Spark...)."""


def log_name(name: str) -> tuple[str, int] | None:
    """What a name in a thread's ``_log/`` folder is: ("commit", seq) or ("fold", seq); None for any
    other name (it is not the archive's, whatever it looks like)."""
    seq, rest = name[:20], name[20:]
    if not seq.isdigit():
        return None
    if rest == COMMIT_SUFFIX:
        return "commit", int(seq)
    if rest == FOLDED_SUFFIX:
        return "fold", int(seq)
    return None


def log_seqs(names: Iterable[str]) -> tuple[list[int], list[int]]:
    """(commit seqs, fold seqs) of the names (basenames) in a ``_log/`` folder, each sorted."""
    found: dict[str, list[int]] = {"commit": [], "fold": []}
    for name in names:
        kind = log_name(name)
        if kind is not None:
            found[kind[0]].append(kind[1])
    return sorted(found["commit"]), sorted(found["fold"])


def below_fold(log: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The commit entries of a thread's ``_log/`` listing (key -> its ``find`` info) that were created
    after a folded manifest at or above their seq was written: key -> seq.

    Entry ``s`` lands before commit ``F >= s``, which lands before fold ``F`` is written, so an entry
    younger (by the storage's own clock) than such a fold was put into a gap gc cut below it: a save no
    reader sees (spec.md section 10). Commit 1 is never collected, so it never lands in a gap. Without
    modification times (or at the same one, S3 keeps whole seconds) nothing is reported."""
    folds: list[tuple[int, Any]] = []
    commits: list[tuple[str, int, Any]] = []
    for key, info in log.items():
        kind = log_name(key.rsplit("/", 1)[-1])
        mtime = info.get("mtime")
        if kind is not None and mtime is not None:
            if kind[0] == "fold":
                folds.append((kind[1], mtime))
            elif kind[1] > 1:
                commits.append((key, kind[1], mtime))
    folds.sort(reverse=True)
    earliest: list[tuple[int, Any]] = []  # (fold seq, earliest mtime of the folds at or above it), seq descending
    for seq, at in folds:
        earliest.append((seq, min(at, earliest[-1][1]) if earliest else at))
    earliest.reverse()  # ascending seq: the first fold at or above an entry's seq gives its bound
    seqs = [seq for seq, _ in earliest]
    out = {}
    for key, seq, mtime in commits:
        i = bisect.bisect_left(seqs, seq)
        if i < len(earliest) and earliest[i][1] < mtime:
            out[key] = seq
    return out


def log_key(thread_id: str, seq: int) -> str:
    return folder_log_key(thread_dir(thread_id), seq)


def folder_log_key(folder: str, seq: int) -> str:
    """Commit entry ``seq`` in the thread folder ``folder`` (a name as listed)."""
    return f"{folder}/{LOG}/{seq:020d}{COMMIT_SUFFIX}"


def manifest_key(thread_id: str, seq: int) -> str:
    return f"{log_dir(thread_id)}/{seq:020d}{FOLDED_SUFFIX}"


def snapshot_key(thread_id: str, step: int, checkpoint_id: str) -> str:
    return f"{thread_dir(thread_id)}/{SNAPSHOTS}/{max(step, 0):012d}-{encode_id(checkpoint_id)}.json.zst"


def segment_key(thread_id: str, first_step: int, token: str, level: int = 0) -> str:
    """A delta segment of tier ``level`` (0: a compaction's; ``L + 1``: the merge of 8 of level ``L``,
    spec.md section 6): the level is in the name (``.l<L>``), so a writer knows it from the key alone."""
    tier = f".l{level}" if level > 0 else ""
    return f"{segments_dir(thread_dir(thread_id))}/{max(first_step, 0):012d}-{token}{tier}{SEGMENT_SUFFIX}"


_LEVEL = re.compile(r"\.l([1-9][0-9]?)" + re.escape(SEGMENT_SUFFIX) + "$")


def segment_level(key: str) -> int | None:
    """The tier of a delta segment's key (``segment_key``), None for a history segment (never merged).
    A writer's policy only: readers never need it, and a key it does not recognise is level 0."""
    if key.endswith(HISTORY_SUFFIX):
        return None
    found = _LEVEL.search(key)
    return int(found.group(1)) if found else 0


def part_key(thread_id: str, token: str) -> str:
    """A sealed part of the folded manifests (``parts.seal_parts``)."""
    return f"{thread_dir(thread_id)}/{PARTS}/{token}.json.zst"


def writes_thread_dir(thread_id: str) -> str:
    """The LangGraph pending writes of an archive thread (spec.md section 11)."""
    return f"{LANGGRAPH_WRITES}/{encode_id(thread_id, 'thread_id')}"


def writes_dir(thread_id: str, checkpoint_id: str) -> str:
    """The LangGraph pending writes of one checkpoint: one object per ``put_writes`` call."""
    return f"{writes_thread_dir(thread_id)}/{encode_id(checkpoint_id, 'checkpoint_id')}"


def writes_key(thread_id: str, checkpoint_id: str, name: str) -> str:
    """The LangGraph writes object ``name`` (``writes_name``) of one checkpoint."""
    return f"{writes_dir(thread_id, checkpoint_id)}/{name}"


def writes_name(call: str, blob_names: Iterable[str]) -> str:
    """The name of a LangGraph writes object: its call's uuid7, then the names of the blobs it
    references (sorted, at most ``WRITES_NAME_BLOBS``), each after a dot. gc reads them from its
    listing (spec.md section 10, rule 5): a write object is no record, and no GET is needed."""
    names = sorted(blob_names)
    assert len(names) <= WRITES_NAME_BLOBS and all(is_blob_name(n) for n in names)
    return "".join([call, *(f".{n}" for n in names), LANGGRAPH_WRITES_SUFFIX])


def writes_blob_names(name: str) -> list[str]:
    """The blob names a LangGraph writes object's name lists (``writes_name``); parts that are not a
    blob's name list nothing."""
    stem = name[: -len(LANGGRAPH_WRITES_SUFFIX)] if name.endswith(LANGGRAPH_WRITES_SUFFIX) else ""
    return sorted(p for p in stem.split(".")[1 : 1 + WRITES_NAME_BLOBS] if is_blob_name(p))


def writes_blob_keys(key: str) -> list[str]:
    """The blob keys a LangGraph writes object (by its key, as listed) keeps from gc: each name its
    name lists, plaintext or sealed (the name alone does not say which; a key of the other kind is
    at most kept longer). Nothing for a key that is not a writes object's."""
    if not key.startswith(LANGGRAPH_WRITES + "/"):
        return []
    return [blob_key(n, sealed=s) for n in writes_blob_names(key.rpartition("/")[2]) for s in (False, True)]


def session_dir(session_id: str) -> str:
    return SESSION_PREFIX + encode_id(session_id, "session_id")


def events_dir(session_id: str) -> str:
    """A session's event batches (``session.stores``), without a trailing slash."""
    return f"{session_dir(session_id)}/{EVENTS}"


def events_key(session_id: str, flush_seq: int) -> str:
    """The event batch of flush ``flush_seq`` of a session."""
    return f"{events_dir(session_id)}/{flush_seq:020d}{EVENTS_SUFFIX}"


HISTORY_SUFFIX = ".rows.parquet"
"""A segment holding one full record's history rows too big for a delta segment's bounds (e.g. the first
checkpoint of a big thread, all of whose content is its history): read under a snapshot's bounds
(kind ``history segment``), and only through a record's ``rows`` (spec.md section 5)."""


def history_segment_key(thread_id: str, step: int, token: str) -> str:
    return f"{thread_dir(thread_id)}/deltas/{max(step, 0):012d}-{token}{HISTORY_SUFFIX}"


_BLOB_NAME = re.compile(r"[0-9a-f]{64}")


def is_blob_key(key: str) -> bool:
    """Is ``key`` in the archive-wide ``_blobs/`` folder (``blob_of``: is it exactly a blob's key)?"""
    return key.startswith(BLOBS + "/")


def is_blob_name(name: str) -> bool:
    """Is ``name`` a blob's name (64 lowercase hex digits: a sha256, or an HMAC-SHA256 when encrypted)?"""
    return bool(_BLOB_NAME.fullmatch(name))


def blob_key(name: str, *, sealed: bool = False) -> str:
    """Where the blob ``name`` lives: ``.zst`` (a zstd frame) or, in an encrypted archive, ``.enc``."""
    return f"{BLOBS}/{name}.{'enc' if sealed else 'zst'}"


def blob_of(key: str) -> tuple[str, bool] | None:
    """(name, sealed) of a key exactly as ``blob_key`` makes it, or None: only such a key is a blob (gc
    deletes, a tombstone may name); any other file in ``_blobs/`` is not the archive's."""
    folder, _, rest = key.partition("/")
    name, _, suffix = rest.partition(".")
    if folder != BLOBS or suffix not in ("zst", "enc") or not is_blob_name(name):
        return None
    return name, suffix == "enc"


def rewrite_snapshot_key(thread_id: str, step: int, checkpoint_id: str) -> str:
    """A snapshot written after the fact (re-base, edit, copy): a fresh key (a random token), never an
    overwrite of the snapshot a save or an earlier rewrite wrote."""
    token = uuid.uuid4().hex[:12]
    return f"{thread_dir(thread_id)}/{SNAPSHOTS}/{max(step, 0):012d}-{encode_id(checkpoint_id)}.{token}.json.zst"


ZSTD_KINDS = frozenset(
    {"commit entry", "head hint", "folded manifest", "manifest part", "snapshot", "blob", "langgraph writes"}
)
"""The kinds of object stored as one zstd frame (the others are plain JSON, or Parquet): a reader
knows from the kind which bytes to expect, and never guesses from the bytes."""

_FOLDERS = {SNAPSHOTS: "snapshot", DELTAS: "delta segment", PARTS: "manifest part"}


def kind_of(key: str) -> str | None:
    """The kind of archive object ``key`` names (its bound in ``limits.LIMITS``); None for a key
    outside the layout above (session logs, foreign files)."""
    if key == ARCHIVE_MARKER:
        return "archive marker"
    if is_blob_key(key):
        return "blob"
    if key.startswith(LANGGRAPH_WRITES + "/"):
        return "langgraph writes" if key.count("/") == 4 and key.endswith(LANGGRAPH_WRITES_SUFFIX) else None
    if not key.startswith(THREAD_PREFIX):
        return None
    parts = key.split("/")
    if len(parts) == 2:
        return "head hint" if parts[1] == HEAD else None
    if len(parts) != 3:
        return None
    if parts[1] == LOG:
        return "folded manifest" if parts[2].endswith(FOLDED_SUFFIX) else "commit entry"
    if parts[1] == "deltas" and parts[2].endswith(HISTORY_SUFFIX):
        return "history segment"
    return _FOLDERS.get(parts[1])
