"""What a commit is asked to do (``ThreadLog.commit``): the planner's ``Plan``, what a lost race does
(``Retry``), and what a landed commit publishes (``Fold``)."""

from __future__ import annotations

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
    write before the commit (``objects`` put, server-side ``copies`` {from: to}), and the caller's
    ``result``. Payloads are data, not coroutines,
    so a plan that is not committed leaves nothing to close."""

    actions: Sequence[Action]
    result: T
    objects: list[tuple[str, bytes]] = field(default_factory=list)
    copies: dict[str, str] = field(default_factory=dict)


Planner = Callable[[Manifest, int], Awaitable[Plan[T]]]
"""Plans one attempt against the manifest as read (``attempt`` counts from 0)."""


@dataclass(frozen=True)
class Retry:
    """What a lost commit race does: re-read and re-plan at most ``attempts`` times (None: until the
    planner returns nothing or raises), after a jittered sleep with the lock released (``backoff``)
    or at once under the lock; once used up, ``CheckpointConflict(gave_up)``."""

    attempts: int | None
    backoff: bool
    gave_up: str = ""


SAVE = Retry(None, backoff=False)
"""A save retries at once; its planner raises ``CheckpointConflict`` when the head moved."""
ONCE = Retry(1, backoff=False, gave_up="thread {thread!r} changed while compacting; try again")
MAINTENANCE = Retry(16, backoff=True, gave_up="thread {thread!r} kept changing during maintenance; try again later")
"""Between attempts maintenance backs off (full jitter, 5 ms doubling up to 0.5 s), so a writer saving
in a tight loop cannot win every race for as long as the attempts last."""


class Fold(enum.Enum):
    """What a landed commit publishes besides itself."""

    IF_COMPACTED = "if-compacted"
    """Save and compaction: the hint when ``hint_due`` (beside the commit), and
    a fold of the manifest after a compaction."""
    FIRST = "first"
    """Maintenance: the fold, then the hint that names it, so the log before it is collectable at once."""
    WITH_HINT = "with-hint"
    """gc's own purge: fold and hint together (it would otherwise leave the fold it supersedes)."""
