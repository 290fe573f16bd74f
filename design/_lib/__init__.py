"""Shared internal helpers under every package (argument checks, jit settings, moments,
row sampling, prefetch, lazy package attributes); they import nothing from the toolkit
above them. The one private package every package may import (docs/architecture.md).
"""
