"""One measurement path: timed replies (run), their speed and pairing (speed), step costs (costs), compare runs, memory (metrics)."""
