"""The chat screen's parts, one job each: the scroll that follows a reply, the bar's state,
the replies streaming into the conversation, the transcript and its history rows."""
