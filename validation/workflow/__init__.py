"""The application layer: the ``austerity`` command line, the demo workflow and ``fit``.

It sits on top of ``design``, ``samplers`` and ``validation`` and nothing imports it;
``validation/__init__.py`` does not import it either, but names :func:`fit.fit` in its lazy
table (``validation.fit``, imported on first use). ``fit`` lives here, not in ``samplers``,
because it runs the CLT check of ``validation``, which sits above ``samplers``.
"""
