"""Test-wide settings: offscreen Qt, one torch thread (stable, fast on small machines)."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Tests must never read or write the user's real preferences.
os.environ.setdefault("GRADVIZ_SETTINGS_SCOPE", "test")
