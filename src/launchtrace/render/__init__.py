"""Renderers: DOT graphs, the HTML report, Chrome trace JSON, diff text. They lay out what the analyses
computed and escape every string that came from a trace (:mod:`~launchtrace.render.escape`).

Example::

    from launchtrace.render.chrome_trace import chrome_trace
    data = chrome_trace([trace])
"""
