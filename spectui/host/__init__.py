"""The chat's engine, outside any UI: which engine and where it runs (`plan`), its load,
state, k restarts and the compare view's baseline (`host`), the live settings a key press
changes (`live`), and what the host tells whoever listens (`messages`).

Below the UI, above the engines: nothing here imports textual or typer.
"""
