"""``python -m ckpt_archive.cli``: the same as the ``ckpt-archive`` command."""

from . import main

main()
