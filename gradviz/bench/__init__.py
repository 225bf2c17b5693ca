"""Speed measurements behind `gradviz bench`."""
