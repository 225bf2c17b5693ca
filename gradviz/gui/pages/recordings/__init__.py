"""Recordings in the app: opening, following, the timeline, the Model health page."""
