"""A hostile ``.tar.zst`` costs ``import`` a bounded read and ends in one typed line, writing nothing.

The files are made by hand, as an attacker would: a zstd frame of raw blocks (the tar headers) and RLE
blocks (4 bytes per 128 KiB of member data), so a 64 KB file holds a 2 GiB member. Each import runs in
a capped child (``tests/capped.py``), through the Python API and the real CLI entry point: the outcome
is ``InvalidExport`` (the CLI: exit 1, one ``error:`` line), the peak stays near a clean process's,
and the destination archive is as it was. Malformed ``export.json`` headers (wrong JSON types) are
refused the same way, never as "unexpected TypeError".
"""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import ckpt_archive as ca
from ckpt_archive import limits
from ckpt_archive.cli import app
from ckpt_archive.transfer import InvalidExport, read_portable, replay, write_portable
from tests.capped import run_capped

GIB2 = 2 << 30
PEAK_MB = 256
_BLOCK = 1 << 17


def frame(*parts: bytes | tuple[bytes, int]) -> bytes:
    """One zstd frame (size not declared, 128 KiB window): ``bytes`` as raw blocks, ``(byte, n)`` as
    RLE blocks of ``n`` copies of ``byte``."""
    blocks: list[tuple[int, bytes, int]] = []  # (type, payload, size)
    for part in parts:
        if isinstance(part, bytes):
            blocks += [(0, part[i : i + _BLOCK], len(part[i : i + _BLOCK])) for i in range(0, len(part), _BLOCK)]
        else:
            byte, n = part
            blocks += [(1, byte, min(_BLOCK, n - i)) for i in range(0, n, _BLOCK)]
    out = [b"\x28\xb5\x2f\xfd\x00\x38"]
    for i, (kind, payload, size) in enumerate(blocks):
        out.append(struct.pack("<I", (size << 3) | (kind << 1) | (i == len(blocks) - 1))[:3] + payload)
    return b"".join(out)


def header_block(name: str, size: int, kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = size, kind, link
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "strict")


def member(name: str, data: bytes, kind: bytes = tarfile.REGTYPE, link: str = "") -> bytes:
    pad = -len(data) % tarfile.BLOCKSIZE
    return header_block(name, len(data), kind, link) + data + b"\0" * pad


def export_json(threads: Any = None, **fields: Any) -> bytes:
    doc = {"format": "ckpt-archive-export", "version": 1, "created_at": "2025-01-01T00:00:00+00:00"}
    doc["threads"] = [{"thread_id": "t", "file": "threads/0.jsonl", "checkpoints": 1}] if threads is None else threads
    return orjson.dumps({**doc, **fields})


END = b"\0" * (2 * tarfile.BLOCKSIZE)
LINE = orjson.dumps(ca.Checkpoint.new("t", {"n": 1}).model_dump(mode="json")) + b"\n"


def hostile() -> dict[str, bytes]:
    """Each hostile file, by what it does."""
    head = member("export.json", export_json())
    return {
        # the tar header declares 2 GiB for a thread of one checkpoint (a ~384 MiB line at most)
        "2 GiB member": frame(head + header_block("threads/0.jsonl", GIB2), (b" ", GIB2), END),
        # a 2 GiB pax header before the member: tarfile reads a pax header whole
        "2 GiB pax header": frame(
            head + header_block("././@PaxHeader", GIB2, tarfile.XHDTYPE), (b"9", GIB2), member("threads/0.jsonl", LINE)
        ),
        # the same before export.json itself
        "2 GiB first header": frame(header_block("././@LongLink", GIB2, tarfile.GNUTYPE_LONGNAME), (b"a", GIB2)),
        # export.json itself declared 2 GiB
        "2 GiB export.json": frame(header_block("export.json", GIB2), (b" ", GIB2)),
        "symlink member": frame(head + member("threads/0.jsonl", b"", tarfile.SYMTYPE, "/dev/zero") + END),
        "hard link member": frame(head + member("threads/0.jsonl", b"", tarfile.LNKTYPE, "export.json") + END),
        "device member": frame(head + member("threads/0.jsonl", b"", tarfile.CHRTYPE) + END),
        "member twice": frame(head + member("threads/0.jsonl", LINE) * 2 + END),
        "more lines than declared": frame(head + member("threads/0.jsonl", LINE * 2) + END),
        "member missing": frame(member("export.json", export_json()) + END),
    }


_IMPORT = """
import io
from pathlib import Path
from typer.testing import CliRunner
from ckpt_archive.cli import app
from ckpt_archive.transfer import read_portable, replay
dest_url = args["dest"]
def files():
    return sorted(str(p.relative_to(dest_url)) for p in Path(dest_url).rglob("*"))
before = files()
def api(path):
    dest = ca.open_archive(dest_url)
    with open(path, "rb") as f:
        return [replay(dest, t, ckpts) for t, _, ckpts in read_portable(f)]
def cli(path):
    got = CliRunner().invoke(app, ["import", path, "--url", dest_url])
    lines = got.stderr.strip().splitlines()
    if got.exit_code != 1 or len(lines) != 1 or not lines[0].startswith("error: "):
        return "CLI said: " + repr(got.stderr[-300:]) + " exit " + str(got.exit_code)
    return "UNTYPED CLI " + lines[0] if "unexpected" in lines[0] else "InvalidExport"
for name, path in args["files"].items():
    attempt("api " + name, lambda: api(path), None)
    out["cli " + name] = cli(path)
out["written"] = "ok" if files() == before else "WRONG: " + repr(sorted(set(files()) - set(before)))
"""


def test_a_hostile_export_costs_import_a_bounded_read_and_writes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    ca.open_archive(str(dest)).save(ca.Checkpoint.new("other", {"mine": True}))
    files = {}
    # a file whose refusal comes after valid checkpoints (a member twice, a line too many) imports those
    # first, as an interrupted import does (a re-run skips them); these are refused before any
    for name, data in hostile().items():
        if name in ("member twice", "more lines than declared"):
            continue
        path = tmp_path / (name.replace(" ", "_") + ".tar.zst")
        path.write_bytes(data)
        files[name] = str(path)
    assert len(Path(files["2 GiB member"]).read_bytes()) < 70_000  # the 64 KB file
    result = run_capped(_IMPORT, {"dest": str(dest), "files": files}, timeout=120)
    peak = result.pop("peak_mb")
    assert peak < PEAK_MB, (peak, result)
    assert result.pop("written") == "ok", result
    assert result == {f"{how} {name}": "InvalidExport" for name in files for how in ("api", "cli")}, result


def test_refusals_say_what_and_why_on_one_line() -> None:
    files = hostile()
    expect = {
        "2 GiB member": "declares 2147483648 bytes, more than ckpt_archive writes",
        "2 GiB pax header": "holds more than its members declare",
        "2 GiB first header": "holds more than its members declare",
        "2 GiB export.json": "'export.json' declares 2147483648 bytes",
        "symlink member": "is a symlink",
        "hard link member": "is a hard link",
        "device member": "not a regular file",
        "member twice": "a second member 'threads/0.jsonl'",
        "more lines than declared": "more checkpoints than export.json declares (1)",
        "member missing": "lacks member 'threads/0.jsonl'",
    }
    for name, data in files.items():
        with pytest.raises(InvalidExport) as caught:
            for _, _, ckpts in read_portable(io.BytesIO(data)):
                list(ckpts)
        message = str(caught.value)
        assert expect[name] in message and "\n" not in message, (name, message)


def test_a_line_longer_than_any_checkpoint_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "EXPORT_LINE_BYTES", 1 << 16)
    four = [{"thread_id": "t", "file": "threads/0.jsonl", "checkpoints": 4}]  # a member of 4 lines may be 256 KiB
    head = member("export.json", export_json(four))
    data = frame(head + header_block("threads/0.jsonl", 1 << 17), (b" ", 1 << 17), END)
    with pytest.raises(InvalidExport, match="line 1 is longer than any checkpoint"):
        for _, _, ckpts in read_portable(io.BytesIO(data)):
            list(ckpts)


def test_a_frame_with_a_window_over_the_bound_is_refused() -> None:
    """A decoder allocates the window a frame asks for: 2 GiB here, refused before."""
    big_window = b"\x28\xb5\x2f\xfd\x00" + bytes([(21 << 3)]) + b"\x01\x00\x00"  # window 2^31, one empty raw block
    with pytest.raises(InvalidExport, match="damaged"):
        list(read_portable(io.BytesIO(big_window)))


BAD_HEADERS: list[tuple[str, Any, str]] = [
    ("thread id a list", [{"thread_id": ["t"], "file": "threads/0.jsonl", "checkpoints": 1}], "thread_id"),
    ("thread id a number", [{"thread_id": 7, "file": "threads/0.jsonl", "checkpoints": 1}], "thread_id"),
    ("thread id empty", [{"thread_id": "", "file": "threads/0.jsonl", "checkpoints": 1}], "thread_id"),
    ("file a list", [{"thread_id": "t", "file": ["threads/0.jsonl"], "checkpoints": 1}], "threads.0.file"),
    ("count a string", [{"thread_id": "t", "file": "threads/0.jsonl", "checkpoints": "1"}], "threads.0.checkpoints"),
    ("count negative", [{"thread_id": "t", "file": "threads/0.jsonl", "checkpoints": -1}], "threads.0.checkpoints"),
    ("count missing", [{"thread_id": "t", "file": "threads/0.jsonl"}], "threads.0.checkpoints"),
    ("thread an object", ["t"], "threads.0"),
    ("threads an object", {"t": 1}, "threads"),
    (
        "two threads one file",
        [{"thread_id": t, "file": "threads/0.jsonl", "checkpoints": 1} for t in ("a", "b")],
        "the same member",
    ),
]


def _with_header(threads: Any) -> bytes:
    return frame(member("export.json", export_json(threads)) + member("threads/0.jsonl", LINE) + END)


@pytest.mark.parametrize(("name", "threads", "named"), BAD_HEADERS, ids=[b[0] for b in BAD_HEADERS])
def test_a_malformed_header_is_a_typed_error_naming_the_field(
    tmp_path: Path, name: str, threads: Any, named: str
) -> None:
    data = _with_header(threads)
    with pytest.raises(InvalidExport, match=r"export\.json has no valid thread list") as caught:
        for _, _, ckpts in read_portable(io.BytesIO(data), only={"t"}):
            list(ckpts)
    assert named in str(caught.value) and "\n" not in str(caught.value)
    assert isinstance(caught.value, ca.CheckpointError)
    path = tmp_path / "bad.tar.zst"
    path.write_bytes(data)
    for extra in ([], ["--thread", "t"]):
        got = CliRunner().invoke(app, ["import", str(path), "--url", str(tmp_path / "dest"), *extra])
        lines = got.stderr.strip().splitlines()
        assert got.exit_code == 1 and len(lines) == 1, (name, got.stderr)
        assert lines[0].startswith("error: export.json has no valid thread list") and named in lines[0], lines
    assert not (tmp_path / "dest").exists()  # a refused import creates no archive


@pytest.mark.parametrize(
    "line",
    [
        b'{"thread_id": ["t"], "checkpoint_id": "c"}\n',
        b'{"thread_id": "t", "checkpoint_id": {"a": 1}}\n',
        b'{"thread_id": "t", "step": "x"}\n',
        b"[1, 2]\n",
        b"not json\n",
    ],
)
def test_a_malformed_checkpoint_line_is_a_typed_error(tmp_path: Path, line: bytes) -> None:
    data = frame(member("export.json", export_json()) + member("threads/0.jsonl", line) + END)
    dest = ca.open_archive(str(tmp_path / "dest"))
    with pytest.raises(InvalidExport, match="a line is not a valid checkpoint") as caught:
        for t, _, ckpts in read_portable(io.BytesIO(data)):
            replay(dest, t, ckpts)
    assert "\n" not in str(caught.value)


def test_an_export_round_trips_with_its_declared_counts(tmp_path: Path) -> None:
    source = ca.open_archive(str(tmp_path / "src"))
    parent = None
    for step in range(5):
        ckpt = ca.Checkpoint.new("t", {"n": step}, step=step)
        source.save(ckpt if parent is None else ckpt.with_parent(parent))
        parent = ckpt.checkpoint_id
    buf = io.BytesIO()
    write_portable(source, ["t"], buf)
    buf.seek(0)
    dest = ca.open_archive(str(tmp_path / "dest"))
    got = [(t, n, replay(dest, t, ckpts).copied) for t, n, ckpts in read_portable(buf)]
    assert got == [("t", 5, 5)]
    assert dest.load("t").state == {"n": 4}


def _valid_tar() -> bytes:
    source = ca.open_archive("memory://import-bounds-fuzz")
    if not source.list("t"):
        first = ca.Checkpoint.new("t", {"n": 0})
        source.save(first)
        source.save(ca.Checkpoint.new("t", {"n": 1}, step=1).with_parent(first.checkpoint_id))
    buf = io.BytesIO()
    write_portable(source, ["t"], buf)
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(buf.getvalue())).read()


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_damaged_export_imports_or_is_refused_typed(data: st.DataObject) -> None:
    """Bytes of a valid export's tar overwritten anywhere (headers, sizes, JSON, lines): the import
    succeeds or raises a ``CheckpointError``, never anything else."""
    tar = bytearray(_valid_tar())
    at = data.draw(st.integers(0, len(tar) - 1))
    blob = data.draw(st.binary(min_size=1, max_size=16))
    tar[at : at + len(blob)] = blob
    packed = zstandard.ZstdCompressor().compress(bytes(tar))
    dest = ca.open_archive(f"memory://import-bounds-{data.draw(st.uuids())}")
    try:
        for t, _, ckpts in read_portable(io.BytesIO(packed)):
            replay(dest, t, ckpts)
    except ca.CheckpointError:
        pass
