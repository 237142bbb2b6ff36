"""Operations over an ``Engine`` (``ckpt_archive.engine``): functions, never the facade.

``save`` (save, compact), ``reads`` (loads, listings, threads, history, batch reads), ``maintenance``
(prune, remove, update_state, pins), ``copy`` (fork, copy_thread), ``gc``, ``verify`` (verify,
validate, restore). Other layers (LangGraph, transfer, the CLI) call them with ``archive.engine``.
"""
