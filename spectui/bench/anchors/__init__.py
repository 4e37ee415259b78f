"""Anchors: other programs' own speculative decoding, timed on the same models and prompts as spectui's loop."""
