"""The on-storage format, pure (no I/O): object keys (``layout``), sealed documents and the manifest fold
(``manifest``, ``schema``, ``parts``), payload objects (``objects``, ``replay``, ``content``) and encryption at
rest (``crypto``). docs/format/spec.md specifies what these write, so another language can read an archive."""
