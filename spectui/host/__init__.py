"""The chat's engine, outside any UI: which engine and where it runs (`plan`), its load
(`loading`), its state as one value and what a switch falls back on (`state`), k restarts
and switches (`host`), what a restart waits for (`waits`), the compare view's baseline
(`baseline`), the live settings a key press changes (`live`), the panel's memory reading
(`memory`), and what the host tells whoever listens (`messages`).

Below the UI, above the engines: nothing here imports textual or typer.
"""
