"""Generated protobuf code of launchtrace's own schemas (``proto/launchtrace/v1``); see ``scripts/gen_proto.py``.

Never edit the ``*_pb2.py`` files by hand: change the ``.proto`` and regenerate.
"""
