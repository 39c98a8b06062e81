"""The local OTLP receiver: :class:`~launchtrace.receiver.collect.Collector`, behind ``launchtrace collect``.

It receives OTLP over gRPC and HTTP and writes JSON Lines; the readers that bring spans back out of files and
backends are in :mod:`launchtrace.sources`.
"""
