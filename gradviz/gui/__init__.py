"""The desktop app (Qt). Nothing here is imported by gradviz.core."""
