"""Coverage-guided fuzzing (atheris/libFuzzer) of every decoder that reads stored bytes.

    python tests/fuzz/atheris_decoders.py -runs=20000      # or -max_total_time=60

Any exception other than a ``CheckpointError`` is a crash and stops the run (non-zero exit).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    from ckpt_archive import codec
    from ckpt_archive.errors import CheckpointError
    from ckpt_archive.format import pages
    from ckpt_archive.format.manifest import Manifest, unseal
    from ckpt_archive.format.objects import SegmentReader, decode_snapshot_content


def one_input(data: bytes) -> None:
    if not data:
        return
    which, body = data[0] % 6, data[1:]
    try:
        if which == 0:
            SegmentReader(body, thread_id="t", key="k").ops("c", 0)
        elif which == 1:
            decode_snapshot_content(body, thread_id="t", checkpoint_id="c", key="k")
        elif which == 2:
            decode_snapshot_content(codec.compress(body), thread_id="t", checkpoint_id="c", key="k")
        elif which == 3:
            Manifest("t").apply_entry(unseal(body, "commit", thread_id="t"))
        elif which == 4:
            Manifest.from_folded(codec.compress(body), "manifest", thread_id="t")
        else:
            pages.decode_page(
                codec.compress(body), {"key": "k", "digest": codec.sha256(body)}, thread_id="t", checkpoint_id="c"
            )
    except CheckpointError:
        pass


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
