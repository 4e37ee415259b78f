"""The chat as a session, without Textual: the conversation, its files, what a line typed
means, the replies' requests and figures. spectui.tui shows it and reacts."""
