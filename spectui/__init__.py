"""spectui: a terminal chat client that makes speculative decoding visible."""

__version__ = "0.1.0"
