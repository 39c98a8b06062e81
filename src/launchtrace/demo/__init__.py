"""A small bundled Warp program, for ``launchtrace demo`` and the docs: runs on the CPU device in seconds."""
