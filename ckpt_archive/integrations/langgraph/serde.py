"""What ArchiveSaver lets a stored value construct: an allowlist, never whatever the bytes name.

An archive is often written by someone else (a shared bucket, a restored backup, a colleague's export).
LangChain messages and plain values are stored as JSON (``values.py``: a message is built only from an
allowlisted class, by its ``type``, never through msgpack); every other value as ``[type, bytes]``;
msgpack bytes may carry an "ext" naming a module, a callable and its arguments, and LangGraph's
``JsonPlusSerializer`` -- unless ``allowed_msgpack_modules`` is given or ``LANGGRAPH_STRICT_MSGPACK`` is
set -- imports and calls it (``os.system`` included). So the saver's default serde is
``JsonPlusSerializer`` with an explicit allowlist, LangGraph's own mechanism: its built-in safe set
(``langgraph.checkpoint.serde._msgpack.SAFE_MSGPACK_TYPES``: LangChain messages and ``Document``;
LangGraph's ``Send``, ``Interrupt``, ``Command``, ``Overwrite``, ``StateSnapshot``, ``PregelTask``,
store ``Item``; datetime, uuid, decimal, set, deque, path, ip address, zoneinfo, re) plus the types the
user registers. A value of any other type is handed back as its plain data (the dict or list it was made
of, as LangGraph does in strict mode, with a warning in LangGraph's log) and is never constructed. The
``json`` type is revived only for the same safe set (and LangChain's own core objects, by LangChain's
allowlist).

A value the serde refuses outright (LangChain's reviver raises ``ValueError`` for an ``lc: 1``
constructor outside its core allowlist and for a jinja2 template, before constructing it; ormsgpack for
ext nested past its depth; ``json`` a ``RecursionError``) is ``UnreadableValue``, raised where the
saver's codec hands a blob to the serde (``encoding.SerdeCodec.loads_many``), naming the checkpoint.

``pickle`` runs code by design, so no stored value of that type is ever decoded, whatever the serde
(a serde built with ``pickle_fallback=True`` would unpickle it): reading refuses it with
``UnsafeValue``, and so does writing, so that the saver never stores what it would refuse to read.

A serde the caller passes is theirs, except LangGraph's permissive one (``check_serde``): refused with
``UnsafeSerde`` unless ``unsafe_any_type=True``, since ``EncryptedSerializer(cipher)`` wraps it and the
README's advice was to pass exactly that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ...errors import CheckpointError

AllowedTypes = Iterable[type | tuple[str, ...]]
"""Types a stored value may construct besides LangGraph's safe set: classes, or ``(module, name)``."""


class UnsafeValue(CheckpointError):
    """A stored LangGraph value is encoded with pickle, which runs code when decoded; it is refused."""


class UnreadableValue(CheckpointError):
    """The serde refuses a stored LangGraph value (a type outside its allowlist, a jinja2 template,
    nesting past its depth): the value is neither constructed nor handed back."""


class UnsafeSerde(CheckpointError, ValueError):
    """The serde given to ArchiveSaver would construct any type a stored value names."""


class InvalidAllowedType(CheckpointError, TypeError):
    """An ``allowed_types`` entry is neither a class nor a ``(module, name)`` tuple."""


def strict_serde() -> JsonPlusSerializer:
    """ArchiveSaver's default serde: constructs LangGraph's safe types only (``ArchiveSaver`` adds the
    registered ones with ``with_allowlist``, as LangGraph's ``compile`` adds a graph's schema types).

    The explicit allowlist (``None``: the safe set alone) is what makes it strict whatever
    ``LANGGRAPH_STRICT_MSGPACK`` says; LangGraph's default (the variable unset) constructs anything.
    """
    return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)


def keys_of(allowed_types: AllowedTypes) -> list[tuple[str, ...]]:
    """``(module, name)`` of each allowed type, the form ``with_allowlist`` takes (and the names
    LangGraph's encoder writes: ``__name__``, not ``__qualname__``)."""
    keys: list[tuple[str, ...]] = []
    for t in allowed_types:
        if isinstance(t, type):
            keys.append((t.__module__, t.__name__))
        elif isinstance(t, tuple) and len(t) >= 2 and all(isinstance(part, str) and part for part in t):
            keys.append(t)
        else:  # a dotted string would silently match nothing
            raise InvalidAllowedType(f"allowed_types takes classes or (module, name) tuples, not {t!r}")
    return keys


def check_serde(serde: Any) -> None:
    """Refuse LangGraph's permissive ``JsonPlusSerializer``, alone or inside an ``EncryptedSerializer``.

    An ``EncryptedSerializer`` decodes a value stored without a cipher suffix as plaintext, with its
    inner serde, so a writer of the archive needs no key; its default inner serde (and
    ``JsonPlusSerializer()``, with ``LANGGRAPH_STRICT_MSGPACK`` unset) constructs anything. Any other
    serde is the caller's own, and trusted. ``_allowed_msgpack_modules`` is what LangGraph's own
    ``with_msgpack_allowlist`` reads: ``True`` means "construct anything"."""
    inner = serde.serde if isinstance(serde, EncryptedSerializer) else serde
    if isinstance(inner, JsonPlusSerializer) and getattr(inner, "_allowed_msgpack_modules", None) is True:
        raise UnsafeSerde(
            f"this {type(serde).__name__} would construct any type an archive names (code execution on read); "
            "use strict_serde() (EncryptedSerializer(cipher, strict_serde())) or pass unsafe_any_type=True"
        )


def check_encoding(typ: str) -> None:
    """Refuse a pickled value, before any serde sees its bytes (``pickle+<cipher>`` when encrypted)."""
    if typ.startswith("pickle"):
        raise UnsafeValue(
            f"a stored LangGraph value is encoded as {typ[:40]!r}, which would run code when read; "
            "ckpt_archive never unpickles: store values LangGraph's msgpack encoding can represent"
        )
