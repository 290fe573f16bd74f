"""The application layer: the ``austerity`` command line and the demo workflow.

It sits on top of ``design``, ``samplers`` and ``validation`` and nothing imports it;
``validation/__init__.py`` does not import it either.
"""
