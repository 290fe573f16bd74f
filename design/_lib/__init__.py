"""Shared internal helpers under every package (argument checks, jit settings, moments,
row sampling, prefetch); they import nothing from the toolkit above them.
"""
