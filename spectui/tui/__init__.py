"""The Textual chat app. Import textual only from here down, never from the CLI's top level."""
