"""Settings: each declared once; the config file and the command line come from them."""
