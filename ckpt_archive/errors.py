"""One exception hierarchy, so callers can catch broadly or precisely.

Every error names what it concerns (thread, checkpoint, object) because the
message is often all an operator sees in a log.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """Base class of every error ckpt_archive raises on purpose."""


class MissingExtra(CheckpointError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it."""


class InvalidState(CheckpointError, ValueError):
    """State, metadata or another field is not JSON-representable."""


class InvalidIdentifier(CheckpointError, ValueError):
    """A thread or checkpoint id that cannot be stored (empty, not a string...)."""


class StateTooLarge(InvalidState):
    """A checkpoint is bigger than an archive object may hold (``ckpt_archive.limits``): refused
    before anything is written, since readers would refuse the objects it needs."""


class ReservedMetadataKey(InvalidState):
    """User metadata used a key that ckpt_archive reserves for itself."""


class CheckpointNotFound(CheckpointError, LookupError):
    """A checkpoint named as a parent or edit target does not exist."""


class CheckpointConflict(CheckpointError):
    """Another writer committed first; nothing of this save was committed.

    Reload the thread's latest checkpoint and try again, or fork explicitly by
    passing ``parent_id``.
    """


class CheckpointVersionConflict(CheckpointConflict):
    """An edit named a stale ``expected_version``; nothing was changed."""


class ArchiveNotFound(CheckpointNotFound):
    """A reader was pointed at a location that holds no archive (no ``_archive.json`` marker)."""


class ArchiveMarkerMissing(ArchiveNotFound):
    """A location holds threads but its ``_archive.json`` marker is gone.

    A new marker would carry a new archive id, and every encrypted checkpoint is bound to the old
    one, so nothing creates it again: the marker must be restored from a copy.
    """


class UnsafeGcGrace(CheckpointError, ValueError):
    """``gc`` was asked for a grace period shorter than running writers and readers rely on.

    Writers trust a cached manifest for half the archive's ``gc_grace`` (at least 1 s) and commit
    payloads they wrote moments before; a shorter grace deletes what such a commit names.
    """


class GraceMismatch(CheckpointError, ValueError):
    """An archive was opened with a ``gc_grace`` other than the one its marker records.

    The grace is the archive's, set when it is created: every process uses it for its manifest cache,
    gc's default grace and gc's floor, so no process's setting can make gc cut the log under another's
    saves. A process asking for another one would not get it: open the archive without ``gc_grace``.
    """


class DuplicateCheckpointId(CheckpointError, ValueError):
    """The checkpoint id is already committed in this thread, or was minted for another thread (an id
    the archive mints names its thread, ``ids.mint_checkpoint_id``, and is saved only there)."""


class UnsupportedFormatVersion(CheckpointError):
    """An object was written by a newer (or unknown) format version."""


class UnsafeBackend(CheckpointError):
    """The filesystem has no atomic put-if-absent, so concurrent writers could fork a thread."""


class IntegrityError(CheckpointError):
    """Stored bytes are not what the manifest says they should be."""

    def __init__(
        self,
        message: str,
        *,
        thread_id: str | None = None,
        checkpoint_id: str | None = None,
        key: str | None = None,
    ) -> None:
        parts = [message]
        if thread_id is not None:
            parts.append(f"thread={thread_id!r}")
        if checkpoint_id is not None:
            parts.append(f"checkpoint={checkpoint_id!r}")
        if key is not None:
            parts.append(f"object={key!r}")
        super().__init__(" ".join(parts))
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id
        self.key = key


class DigestMismatch(IntegrityError):
    """An object's sha256 differs from the one recorded when it was written."""


class TruncatedObject(IntegrityError):
    """An object is shorter than recorded, or cannot be decoded at all."""


class ForeignRows(IntegrityError):
    """A delta segment's rows name another thread than the one it is read for: the object was copied
    or moved under this thread by hand. Restore the thread's own segment (or re-copy the thread)."""


class StaleRows(IntegrityError):
    """A segment the manifest references holds rows of a checkpoint that is in no record, or whose history
    rows the manifest places elsewhere: a reader of the Parquet files alone would count them (twice, or
    for a checkpoint the API no longer shows). Maintenance rewrites such segments; re-run the prune, or
    copy the thread (``copy_thread`` writes every row once)."""


class MissingRows(IntegrityError):
    """A full record has no history rows (``rows``), or its rows do not turn its base (its parent's
    content, or the empty content) into its content: a reader of the Parquet files alone misses or
    misreads that checkpoint. Loads are unaffected (they read its snapshot); copy the thread to restore
    the rows."""


class ObjectTooLarge(IntegrityError):
    """A stored object is (or would decompress to) more bytes than any writer produces for its kind
    (``ckpt_archive.limits``): a decompression bomb or damage, refused before the memory is taken."""


class NotARegularFile(ObjectTooLarge):
    """A local archive object is a FIFO, a device, a socket or a folder (or a symlink to one), never
    what a writer stores: a FIFO blocks a reader's open, a device reads without end. Refused unread,
    as an object of unbounded size is, so every reader that falls back from an oversized object (an
    optional hint or fold) falls back from it too, and verify reports it."""


class MissingObject(IntegrityError):
    """An object the manifest references is gone."""


class MissingCommit(MissingObject):
    """The head hint names a commit entry the log does not hold: a save that crashed after putting
    its hint (nothing committed is lost), or a deleted commit entry (its checkpoint is lost, and the
    thread silently reads as of the commit before it). The log alone cannot tell which."""


class LostCommit(IntegrityError):
    """A commit entry at or below a folded manifest that was created after that fold was written: it
    landed in the gap gc cut in the log below the fold (a writer committing against a manifest older
    than the grace gc used), so no reader sees it. gc keeps it (it is the only copy of that save);
    if its checkpoint is wanted, save it again, then delete the entry."""


class BrokenChain(IntegrityError):
    """A delta's chain back to its full snapshot is broken."""


class NeedsManifest(BrokenChain):
    """A snapshot replays lists from its ancestors' history rows, and the reader was handed no manifest
    to find them in (the head hint holds the newest chain only): read the manifest and replay again."""


class CorruptManifest(IntegrityError):
    """A manifest object cannot be parsed or fails its checksum."""


class EncryptionError(CheckpointError):
    """Encryption at rest is misconfigured for what is being read or written."""


class KeyUnavailable(EncryptionError):
    """The key an object was encrypted with (or the active key) is not provided."""


class DecryptionFailed(IntegrityError):
    """A ciphertext does not authenticate: tampered, or moved to another archive/thread/checkpoint/object."""


class PlaintextRefused(IntegrityError):
    """A payload is stored in plaintext where the archive requires encryption."""


class ProtectionError(IntegrityError):
    """A protected checkpoint cannot prove that its state and messages are complete and unaltered."""


class UnprovableCheckpoint(ProtectionError):
    """The checkpoint carries no protection (a legacy checkpoint): its content cannot be proven."""


class ProtectionMismatch(ProtectionError):
    """The state or messages no longer hash to the digests recorded when the checkpoint was created."""


class BindingMismatch(ProtectionError):
    """The host's binding digest (e.g. of an authorisation token) is not the one the checkpoint records."""


class StateValidationError(InvalidState):
    """A stored state no longer validates against the model it is read into."""


class SessionFlushConflict(CheckpointConflict):
    """Another manager flushed the same session first; nothing of this flush was stored."""


class StorageError(CheckpointError, OSError):
    """The storage backend failed or refused a request (raised by the storage layer, ``ckpt_archive.storage``).

    Also an ``OSError``, which is what such failures were before they were typed, so code that caught
    ``OSError`` keeps working. The message says what to do; the backend's own error is the cause.
    """


class StorageUnavailable(StorageError):
    """The storage did not answer (unreachable, timing out, throttling, 5xx) within the retry budget."""


class StorageFull(StorageError):
    """The filesystem is out of space or over quota: nothing of the failed write is visible."""


class ReadOnlyStorage(StorageError):
    """The archive's location is read-only (a read-only mount, an immutable bucket): reads still work."""


class AccessDenied(StorageError):
    """The credentials in use may not do this (HTTP 403, EACCES): the request was refused."""


class CredentialsMissing(AccessDenied):
    """No credentials were found for an object store that needs them."""


class BucketNotFound(StorageError):
    """The bucket (or container) named by the archive URL does not exist: nothing was read or written."""


class CommitOutcomeUnknown(StorageError):
    """A commit was sent but its reply was lost (retries used up): it may or may not have landed.

    Saving the same checkpoint again finds out, and is safe: a re-save of a committed checkpoint
    (same id, same content) returns its id and commits nothing new.
    """
