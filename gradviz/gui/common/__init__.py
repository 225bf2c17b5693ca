"""Qt helpers every part of the GUI shares and that are not widgets: background tasks,
failure sentences, the settings file and recent files, and the readouts protocol."""
