"""The format's zstd dictionary for the log documents (spec.md section 6, "Stored bytes").

A commit entry is small (a plain save's is one record and its ops, ~2 KB of canonical JSON) and
zstd'd alone, so about half of what it stores is the format's own vocabulary (key names, action and
field names, the digest of an empty list), spelled again in every entry: measured on W1 (1,000
saves), an entry without its message costs 526 bytes compressed, its ~1 KB message 355. A raw-content
dictionary holding that vocabulary once, fixed by the format and known to every reader, makes the
entries cost what is particular to each (design note 009): no object to store or fetch, no request,
nothing a reader must resolve.

Pure data, no ckpt_archive import (``codec`` uses it): the exact bytes, which spec.md section 6 reproduces
and ``tests/test_log_dictionary.py`` compares with the spec's text.
"""

from __future__ import annotations

from typing import Final

KINDS: Final = frozenset({"commit entry", "head hint", "folded manifest", "manifest part"})
"""The kinds of object (``limits.LIMITS``) stored as zstd with ``TEXT`` as a raw-content dictionary."""

TEXT: Final = (
    b'{"digest":"0000000000000000000000000000000000000000000000000000000000000000","format_version":1,'
    b'"head":"","inline":{},"parts":[{"count":64,"key":"thread_id=/_parts/0000000000000000000000000000'
    b'0000.json.zst","level":0,"sha256":"0000000000000000000000000000000000000000000000000000000000000'
    b'000","size":0}],"records":[{"bytes":0,"created_at":"2026-01-01T00:00:00.000000+00:00","depth":0,'
    b'"fields":{"attempts":{},"child_ledger":{},"cleared_interrupt":null,"pending_nodes":[]},"id":"","'
    b'kind":"full","messages_sha256":"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945'
    b'","metadata":{},"parent":"","ref":{"key":"thread_id=/snapshots/000000000000-.json.zst","sha256":'
    b'"0000000000000000000000000000000000000000000000000000000000000000","size":0,"type":"snapshot"},"'
    b'rows":{"key":"thread_id=/deltas/000000000000-0000000000000000.parquet","row_group":0,"sha256":"0'
    b'000000000000000000000000000000000000000000000000000000000000000","size":0,"type":"segment"},"sta'
    b'te_sha256":"0000000000000000000000000000000000000000000000000000000000000000","step":0,"version"'
    b':1},{"bytes":0,"created_at":"2026-01-01T00:00:00.000000+00:00","depth":1,"fields":{"attempts":{}'
    b',"child_ledger":{},"cleared_interrupt":null,"pending_nodes":[]},"id":"","kind":"delta","messages'
    b'_sha256":"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945","metadata":{},"paren'
    b't":"","ref":{"key":"thread_id=/deltas/000000000000-0000000000000000.parquet","row_group":0,"sha2'
    b'56":"0000000000000000000000000000000000000000000000000000000000000000","size":0,"type":"segment"'
    b'},"state_sha256":"0000000000000000000000000000000000000000000000000000000000000000","step":0,"ve'
    b'rsion":1}],"removed":[],"seq":0,"thread_id":"","tombstones":{},"type":"manifest"}'
    b'{"chain":[{"bytes":0,"created_at":"2026-01-01T00:00:00.000000+00:00","depth":0,"fields":{"attemp'
    b'ts":{},"child_ledger":{},"cleared_interrupt":null,"pending_nodes":[]},"id":"","kind":"full","mes'
    b'sages_sha256":"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945","metadata":{},"'
    b'parent":"","ref":{"key":"thread_id=/snapshots/000000000000-.json.zst","sha256":"0000000000000000'
    b'000000000000000000000000000000000000000000000000","size":0,"type":"snapshot"},"rows":{"key":"thr'
    b'ead_id=/deltas/000000000000-0000000000000000.parquet","row_group":0,"sha256":"000000000000000000'
    b'0000000000000000000000000000000000000000000000","size":0,"type":"segment"},"state_sha256":"00000'
    b'00000000000000000000000000000000000000000000000000000000000","step":0,"version":1}],"digest":"00'
    b'00000000000000000000000000000000000000000000000000000000000000","entry_sha256":"0000000000000000'
    b'000000000000000000000000000000000000000000000000","format_version":1,"manifest_seq":0,"seq":0,"t'
    b'hread_id":"","type":"head"}'
    b'{"actions":[{"action":"add","record":{"bytes":0,"created_at":"2026-01-01T00:00:00.000000+00:00",'
    b'"depth":0,"fields":{"attempts":{},"child_ledger":{},"cleared_interrupt":null,"pending_nodes":[]}'
    b',"id":"","kind":"full","messages_sha256":"4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11'
    b'161202b945","metadata":{},"parent":"","ref":{"key":"thread_id=/snapshots/000000000000-.json.zst"'
    b',"sha256":"0000000000000000000000000000000000000000000000000000000000000000","size":0,"type":"sn'
    b'apshot"},"rows":{"key":"thread_id=/deltas/000000000000-0000000000000000.parquet","row_group":0,"'
    b'sha256":"0000000000000000000000000000000000000000000000000000000000000000","size":0,"type":"segm'
    b'ent"},"state_sha256":"0000000000000000000000000000000000000000000000000000000000000000","step":0'
    b',"version":1}},{"action":"compact","empty":[],"key":"thread_id=/deltas/000000000000-000000000000'
    b'0000.parquet","row_groups":{"":{"bytes":0,"row_group":0}},"sha256":"0000000000000000000000000000'
    b'000000000000000000000000000000000000","size":0}],"committed_at":"2026-01-01T00:00:00.000000+00:0'
    b'0","digest":"0000000000000000000000000000000000000000000000000000000000000000","format_version":'
    b'1,"seq":0,"thread_id":"","type":"commit"}'
    b'{"actions":[{"action":"add","ops":[{"op":"append","path":["channels","messages","items"],"value"'
    b':[{"content":"","id":"","type":"human"},{"json":{"content":"","id":"","role":"assistant"}}]},{"o'
    b'p":"set","path":["checkpoint","channel_versions",""],"value":0},{"op":"set","path":["checkpoint"'
    b',"id"],"value":""},{"op":"set","path":["checkpoint","ts"],"value":"2026-01-01T00:00:00.000000+00'
    b':00"},{"op":"set","path":["checkpoint","updated_channels"],"value":[]}],"record":{"bytes":0,"cre'
    b'ated_at":"2026-01-01T00:00:00.000000+00:00","depth":1,"fields":{"attempts":{},"child_ledger":{},'
    b'"cleared_interrupt":null,"pending_nodes":[]},"id":"","kind":"delta","messages_sha256":"4f53cda18'
    b'c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945","metadata":{"ckpt_archive.langgraph":{"'
    b'id":"","parent":"","top":true},"parents":{},"source":"loop","step":0},"parent":"","ref":{"type":'
    b'"inline"},"state_sha256":"0000000000000000000000000000000000000000000000000000000000000000","ste'
    b'p":0,"version":1}}],"committed_at":"2026-01-01T00:00:00.000000+00:00","digest":"0000000000000000'
    b'000000000000000000000000000000000000000000000000","format_version":1,"seq":0,"thread_id":"","typ'
    b'e":"commit"}'
    b'{"actions":[{"action":"add","ops":[{"op":"append","path":["messages"],"value":[{"content":"","id'
    b'":"","role":"assistant"}]},{"op":"set","path":[""],"value":0}],"record":{"bytes":0,"created_at":'
    b'"2026-01-01T00:00:00.000000+00:00","depth":1,"fields":{"attempts":{},"child_ledger":{},"cleared_'
    b'interrupt":null,"pending_nodes":[]},"id":"","kind":"delta","messages_sha256":"4f53cda18c2baa0c03'
    b'54bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945","metadata":{},"parent":"","ref":{"type":"inline"'
    b'},"state_sha256":"0000000000000000000000000000000000000000000000000000000000000000","step":0,"ve'
    b'rsion":1}}],"committed_at":"2026-01-01T00:00:00.000000+00:00","digest":"000000000000000000000000'
    b'0000000000000000000000000000000000000000","format_version":1,"seq":0,"thread_id":"","type":"comm'
    b'it"}'
)
"""Five canonical JSON documents, concatenated: a folded manifest, a head hint, a compacting commit, a
LangGraph checkpoint's plain commit (spec.md section 11: its channels, checkpoint fields and metadata) and
a plain commit, with empty ids and zero digests (the vocabulary, never a thread's content). The closest
to the end costs least to refer to, so the plain commit (most entries are one) is last."""
