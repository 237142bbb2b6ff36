"""What a commit is asked to do (``ThreadLog.commit``): the planner's ``Plan``, and the commit's
``CommitPolicy`` (what a lost race does, what a landed commit publishes, which view of the thread it
keeps), one of the named presets ``SAVE``, ``COMPACT``, ``MAINTENANCE`` and ``GC``."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..format.actions import Action
from ..format.manifest import Manifest

T = TypeVar("T")


@dataclass
class Plan(Generic[T]):
    """What a planner returns for one commit attempt: the commit's ``actions`` (none: nothing is
    committed and ``result`` is returned as it is, e.g. an idempotent re-save or a dry run), what to
    write before the commit (``objects`` put, server-side ``copies`` {from: to}), the caller's
    ``result``, and what must happen once this commit landed, before it is published (``landed``,
    given the new manifest: a slow save's check of its own commit). Payloads are data, not coroutines,
    so a plan that is not committed leaves nothing to close."""

    actions: Sequence[Action]
    result: T
    objects: list[tuple[str, bytes]] = field(default_factory=list)
    copies: dict[str, str] = field(default_factory=dict)
    landed: Callable[[Manifest], Awaitable[None]] | None = None


Planner = Callable[[Manifest, int], Awaitable[Plan[T]]]
"""Plans one attempt against the manifest as read (``attempt`` counts from 0)."""


class Fold(enum.Enum):
    """What a landed commit publishes besides itself."""

    IF_COMPACTED = "if-compacted"
    """``compact``: the hint when ``hint_due`` (beside the commit), and a fold of the manifest after a
    compaction, then the hint naming it."""
    NEXT_COMMIT = "next-commit"
    """A save: the hint when ``hint_due`` (beside the commit); a compaction publishes nothing more (its
    hint only when it lags: ``hint_lags``) and owes its fold, which the writer's next plain commit of the
    thread puts beside its own entry (the fold of the manifest it was planned against, a sealed part
    first), or its idle timer (``Root.hint_idle``), ``close`` or the exit hook; the hint naming that fold
    goes with the save after (``ThreadLog.hint_stale``), once the fold has landed, or after it from the
    timer, ``close`` and the exit hook. So no save writes a snapshot, a segment, a fold, a hint and a
    part at once (issue 20's worst save: at most 4 requests), and no hint names a fold not there yet."""
    FIRST = "first"
    """Maintenance: the fold, then the hint that names it, so the log before it is collectable at once."""
    WITH_HINT = "with-hint"
    """gc's own purge: fold and hint together (it would otherwise leave the fold it supersedes)."""


@dataclass(frozen=True)
class CommitPolicy:
    """How ``ThreadLog.commit`` commits, named (``SAVE``, ``COMPACT``, ``MAINTENANCE``, ``GC``).

    A lost commit race re-reads and re-plans at most ``attempts`` times (None: until the planner
    returns nothing or raises), after a jittered sleep with the lock released (``backoff``) or at once
    under the lock; once used up, ``CheckpointConflict(gave_up)``. ``fold``: what a landed commit
    publishes. ``cache=False``: the manifest is read afresh and the engine's view of the thread is left
    as it was, so its next save still detects the commits of other writers. ``first_read``: the
    manifest the first attempt plans against instead of a read (a save's known head: ``known_head``)."""

    name: str
    attempts: int | None
    backoff: bool
    fold: Fold
    gave_up: str = ""
    cache: bool = True
    first_read: Callable[[], Awaitable[Manifest]] | None = None

    def known_head(self, first_read: Callable[[], Awaitable[Manifest]]) -> CommitPolicy:
        """This policy, its first attempt planned against ``first_read()`` (the writer's known head)."""
        return dataclasses.replace(self, first_read=first_read)


SAVE = CommitPolicy("save", None, backoff=False, fold=Fold.NEXT_COMMIT)
"""A save retries at once (its planner raises ``CheckpointConflict`` when the head moved) and writes
the hint beside the commit when due (``hint_due``); a compaction's fold goes beside the next plain
commit, the hint naming it with the one after (``Fold.NEXT_COMMIT``)."""
COMPACT = CommitPolicy(
    "compact", 16, backoff=True, fold=Fold.IF_COMPACTED, gave_up="thread {thread!r} changed while compacting; try again"
)
"""``compact``: maintenance (it merges the thread's segments by tier, reading them first: spec.md section
6), so a lost race re-plans and backs off like maintenance, and a writer saving in a tight loop cannot
make it fail at once; published like a save's compaction."""
MAINTENANCE = CommitPolicy(
    "maintenance",
    16,
    backoff=True,
    fold=Fold.FIRST,
    gave_up="thread {thread!r} kept changing during maintenance; try again later",
)
"""Prune, remove, edit, pin, fork, copy. Between attempts maintenance backs off (full jitter, 5 ms
doubling up to 0.5 s), so a writer saving in a tight loop cannot win every race for as long as the
attempts last; then the fold, and the hint that names it."""
GC = dataclasses.replace(MAINTENANCE, name="gc", fold=Fold.WITH_HINT, cache=False)
"""gc's purge: retried like maintenance, fold and hint together, against a fresh read that leaves the
engine's cached view of the thread as it was."""
