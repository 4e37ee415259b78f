"""One measurement path: timed replies, compare runs, rates and memory."""
