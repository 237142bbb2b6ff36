"""Optional encryption at rest: AES-256-GCM over snapshots and delta values (needs the ``crypto`` extra).

What is encrypted, and what stays clear (see docs/format/spec.md, "Encryption at rest"):

* a snapshot object is sealed whole: ``CKAE1\\n`` + key-id length (1 byte) + key id +
  12-byte nonce + ciphertext-and-tag of the (zstd) snapshot bytes;
* every delta operation's ``value`` is replaced by the string ``enc1:`` + base64 of the
  same envelope around the value's canonical JSON -- inline in commit entries, and as is
  in the Parquet ``value`` column after compaction. Op kind, path, key, ids and steps
  stay clear, so analysts can still see *what* changed, not *to what*;
* messages are content like the state: inside the sealed snapshot (or, for a list it replays,
  in the history rows it replays from), and message ops (``target: "messages"``) have their
  values sealed like state ops;
* the record gets ``enc: {"alg", "key_id"}`` and, instead of the plain ``state_sha256`` and
  ``messages_sha256`` (which would let anyone confirm a guess), ``state_mac`` and
  ``messages_mac``: HMAC-SHA256 of the state and of the messages under the data key.

The associated data binds every ciphertext to the archive (its marker's digest), the
thread, the checkpoint and the object (snapshot, or op index and path), so a ciphertext
moved anywhere else fails to decrypt. Keys come from a mapping, a callable or the
environment and are never written to storage; each record names the key id it used, so
keys can rotate (old ids stay readable while their key is still provided).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping
from typing import Any

from .. import codec
from ..delta import Delta
from ..errors import DecryptionFailed, IntegrityError, KeyUnavailable, PlaintextRefused
from . import layout

MAGIC = b"CKAE1\n"
VALUE_PREFIX = "enc1:"
ALG = "AES-256-GCM"
KeySource = Mapping[str, bytes] | Callable[[str], bytes | None]


class Encryption:
    """Keys and policy. ``required`` (default): plaintext payloads are refused on read."""

    def __init__(self, keys: KeySource, active_key_id: str, *, required: bool = True) -> None:
        if not active_key_id or len(active_key_id.encode()) > 255:
            raise ValueError("active_key_id must be 1..255 bytes")
        self._keys = keys
        self.active_key_id = active_key_id
        self.required = required
        self.key(active_key_id)  # fail now, not at the first save

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        prefix: str = "CKPT_ARCHIVE_KEY_",
        active: str = "CKPT_ARCHIVE_ACTIVE_KEY",
        required: bool = True,
    ) -> Encryption:
        """Keys from ``<prefix><KEY_ID>=<base64 of 32 bytes>``, the active id from ``<active>``."""
        env = dict(os.environ if environ is None else environ)
        keys = {name[len(prefix) :]: base64.b64decode(v) for name, v in env.items() if name.startswith(prefix)}
        if active not in env:
            raise KeyUnavailable(f"environment variable {active} (the active key id) is not set")
        return cls(keys, env[active], required=required)

    def key(self, key_id: str) -> bytes:
        try:
            key = self._keys(key_id) if callable(self._keys) else self._keys.get(key_id)
        except Exception as exc:
            raise KeyUnavailable(f"key {key_id!r} could not be obtained ({type(exc).__name__})") from None
        if key is None:
            raise KeyUnavailable(f"no key {key_id!r} is configured: cannot read or write with it")
        if not isinstance(key, bytes) or len(key) != 32:
            raise KeyUnavailable(f"key {key_id!r} must be 32 bytes (AES-256)")
        return key

    # -- envelopes ---------------------------------------------------------------
    def seal(self, data: bytes, aad: bytes) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        kid = self.active_key_id.encode()
        nonce = os.urandom(12)
        return MAGIC + bytes([len(kid)]) + kid + nonce + AESGCM(self.key(self.active_key_id)).encrypt(nonce, data, aad)

    def open(self, blob: bytes, aad: bytes, where: dict[str, Any]) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 1:
            raise PlaintextRefused("object is not encrypted, but this archive requires encryption", **where)
        n = blob[len(MAGIC)]
        start = len(MAGIC) + 1
        kid = blob[start : start + n].decode(errors="replace")
        nonce, ct = blob[start + n : start + n + 12], blob[start + n + 12 :]
        try:
            return AESGCM(self.key(kid)).decrypt(nonce, ct, aad)
        except (InvalidTag, ValueError):
            raise DecryptionFailed(
                f"ciphertext does not authenticate under key {kid!r} (tampered, or moved from another "
                "archive, thread, checkpoint or object)",
                **where,
            ) from None

    def mac(self, key_id: str, raw_state: bytes) -> str:
        return hmac.new(self.key(key_id), raw_state, hashlib.sha256).hexdigest()


def aad(archive_id: str, thread_id: str, checkpoint_id: str, what: str) -> bytes:
    return codec.dumps(["ckpt_archive", archive_id, thread_id, checkpoint_id, what])


def blob_aad(archive_id: str, name: str) -> bytes:
    """Associated data of a blob object: the archive and the blob's (keyed) name, no thread or checkpoint,
    since every thread and checkpoint that holds the value shares it."""
    return codec.dumps(["ckpt_archive", archive_id, "blob", name])


def _op_what(i: int, op: dict[str, Any]) -> str:
    """Associated data of an op's value: its index, path and (for a message op) its target."""
    what = f"op:{i}:{codec.dumps(op.get('path')).decode()}"
    target = op.get("target")
    return what if target is None else f"{what}:{target}"


def seal_ops(enc: Encryption, archive_id: str, thread_id: str, checkpoint_id: str, ops: Delta) -> Delta:
    out: Delta = []
    for i, op in enumerate(ops):
        if op.get("op") == "del":
            out.append(op)
            continue
        what = _op_what(i, op)
        blob = enc.seal(codec.dumps(op.get("value")), aad(archive_id, thread_id, checkpoint_id, what))
        out.append({**op, "value": VALUE_PREFIX + base64.b64encode(blob).decode()})
    return out


def open_ops(enc: Encryption | None, record: dict[str, Any], archive_id: str, thread_id: str, ops: Delta) -> Delta:
    """Plain ops of ``record``; refuses plaintext when encryption is required."""
    cid = record["id"]
    where = {"thread_id": thread_id, "checkpoint_id": cid}
    if "enc" not in record:
        if enc is not None and enc.required and ops:
            raise PlaintextRefused("delta is not encrypted, but this archive requires encryption", **where)
        return ops
    if enc is None:
        raise KeyUnavailable(f"checkpoint {cid!r} of thread {thread_id!r} is encrypted: open the archive with keys")
    out: Delta = []
    for i, op in enumerate(ops):
        value = op.get("value")
        if op.get("op") == "del":
            out.append(op)
            continue
        if not isinstance(value, str) or not value.startswith(VALUE_PREFIX):
            raise PlaintextRefused("an operation of an encrypted delta holds a plain value", **where)
        try:
            blob = base64.b64decode(value[len(VALUE_PREFIX) :], validate=True)
        except ValueError:
            raise DecryptionFailed("encrypted value is not base64", **where) from None
        what = _op_what(i, op)
        plain = enc.open(blob, aad(archive_id, thread_id, cid, what), where)
        out.append({**op, "value": codec.loads(plain)})
    return out


def open_snapshot(
    enc: Encryption | None, record: dict[str, Any], archive_id: str, thread_id: str, data: bytes
) -> bytes:
    cid = record["id"]
    where = {"thread_id": thread_id, "checkpoint_id": cid, "key": record["ref"].get("key")}
    if "enc" not in record:
        if enc is not None and enc.required:
            raise PlaintextRefused("snapshot is not encrypted, but this archive requires encryption", **where)
        return data
    if enc is None:
        raise KeyUnavailable(f"checkpoint {cid!r} of thread {thread_id!r} is encrypted: open the archive with keys")
    return enc.open(data, aad(archive_id, thread_id, cid, "snapshot"), where)


def open_blob(
    enc: Encryption | None, record: dict[str, Any], archive_id: str, name: str, data: bytes
) -> tuple[bytes, Callable[[bytes], bool] | None]:
    """(the zstd bytes of a blob object ``record`` references, the check of its text against its name:
    None for a plaintext blob, whose name is its sha256; the keyed digest under the record's key)."""
    where = {"checkpoint_id": record["id"], "key": layout.blob_key(name, sealed="enc" in record)}
    if "enc" not in record:
        if enc is not None and enc.required:
            raise PlaintextRefused("blob is not encrypted, but this archive requires encryption", **where)
        return data, None
    if enc is None:
        raise KeyUnavailable(f"checkpoint {record['id']!r} is encrypted: open the archive with keys")
    key_id = record["enc"]["key_id"]
    plain = enc.open(data, blob_aad(archive_id, name), where)
    return plain, lambda raw: hmac.compare_digest(enc.mac(key_id, raw), name)


def check_mac(
    enc: Encryption | None,
    record: dict[str, Any],
    thread_id: str,
    content: tuple[dict[str, Any], list[Any]],
    mismatch: type[IntegrityError] = DecryptionFailed,
) -> None:
    """A rebuilt (state, messages) must match ``state_mac`` / ``messages_mac`` (where recorded);
    ``mismatch``: the error a difference is (a protected record's is ``ProtectionMismatch``)."""
    if enc is None:
        return
    for name, value in (("state", content[0]), ("messages", content[1])):
        mac = record.get(f"{name}_mac")
        if mac is None:
            continue
        if not hmac.compare_digest(enc.mac(record["enc"]["key_id"], codec.dumps(value)), str(mac)):
            raise mismatch(
                f"rebuilt {name} does not match the {name}_mac recorded at save",
                thread_id=thread_id,
                checkpoint_id=record["id"],
            )
