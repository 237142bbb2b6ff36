"""langgraph-checkpoint-conformance at level FULL (all 8 capabilities) on local disk, memory:// and S3."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from ckpt_archive.integrations.langgraph import ArchiveSaver


@pytest.mark.parametrize("backend", ["local", "memory", "s3"])
async def test_conformance_full(
    backend: str, archive_url: Callable[..., tuple[str, dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    @checkpointer_test(name=f"ArchiveSaver[{backend}]")
    async def factory() -> AsyncIterator[ArchiveSaver]:
        url, opts = archive_url(backend)
        yield ArchiveSaver.from_url(url, opts)

    report = await validate(factory, progress=ProgressCallbacks.verbose())
    report.print_report()
    out = capsys.readouterr().out
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert {name for name, r in report.results.items() if r.detected} == {c.value for c in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL", (failures, out)
    assert all(r.passed for r in report.results.values()), failures
    assert f"Result: FULL ({len(ALL_CAPABILITIES)}/{len(ALL_CAPABILITIES)})" in out
