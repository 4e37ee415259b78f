"""The command line. Heavy imports stay inside the commands so `spectui --help` is instant."""
